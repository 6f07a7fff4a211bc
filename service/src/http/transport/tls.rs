//! TLS on the listener (`[server.tls]`) with rustls through tokio-rustls:
//! the acceptor is built from the PEM files and swapped atomically on
//! reload, so a renewed certificate serves new connections at once while
//! open ones keep theirs. With `client_ca_path`, client certificates are
//! verified by rustls's WebPKI verifier ([`WebPkiClientVerifier`]) and the
//! verified leaf reaches each request as a [`ClientCertificate`]; which
//! role its names hold is `http::auth`'s business.

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use scorer_engine::config::tls::TlsConfig;
use tokio_rustls::TlsAcceptor;

/// A TLS setting that cannot be put in force; nothing changed.
#[derive(Debug, thiserror::Error)]
#[error("config key `{key}`: {reason}")]
pub struct TlsError {
    /// The dotted key whose file is at fault.
    pub key: &'static str,
    /// What is wrong, naming the file.
    pub reason: String,
}

impl TlsError {
    fn new(key: &'static str, reason: impl Into<String>) -> Self {
        Self {
            key,
            reason: reason.into(),
        }
    }
}

impl From<TlsError> for scorer_engine::config::ConfigError {
    fn from(e: TlsError) -> Self {
        Self::Invalid {
            key: e.key.to_owned(),
            reason: e.reason,
        }
    }
}

/// The verified certificate a client presented, leaf first, on every request
/// of its connection.
#[derive(Debug, Clone)]
pub struct ClientCertificate(pub Arc<CertificateDer<'static>>);

/// The listener's TLS acceptor, replaceable while serving.
pub struct ServerTls {
    acceptor: ArcSwap<TlsAcceptor>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

impl ServerTls {
    /// The acceptor `cfg` describes; `None` when TLS is off.
    ///
    /// # Errors
    /// A file that cannot be read or holds no usable certificate or key.
    pub fn load(cfg: &TlsConfig) -> Result<Option<Self>, TlsError> {
        Ok(build(cfg)?.map(|a| Self {
            acceptor: ArcSwap::from_pointee(a),
        }))
    }

    /// The acceptor for the next connection.
    pub fn acceptor(&self) -> Arc<TlsAcceptor> {
        self.acceptor.load_full()
    }

    /// Puts `acceptor` (from [`build`]) in force for new connections.
    pub fn install(&self, acceptor: TlsAcceptor) {
        self.acceptor.store(Arc::new(acceptor));
    }
}

/// *ring*, as reqwest's rustls uses: aws-lc-rs would add post-quantum key
/// exchange (X25519MLKEM768) at the price of building AWS-LC's C and
/// assembly with every fresh build; between hosts of one deployment the
/// classical groups (X25519, P-256, P-384) are what the peers offer today.
#[expect(deprecated, reason = "ring has no post-quantum groups; see above")]
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::new(key, format!("cannot read {}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(TlsError::new(
            key,
            format!("{} holds no PEM CERTIFICATE block", path.display()),
        ));
    }
    Ok(certs)
}

/// Builds the acceptor `cfg` describes, reading its files; `None` when TLS
/// is off.
///
/// # Errors
/// A file that cannot be read or holds no usable certificate or key, or a
/// key that does not match the certificate.
pub fn build(cfg: &TlsConfig) -> Result<Option<TlsAcceptor>, TlsError> {
    let (Some(cert_path), Some(key_path)) = (&cfg.cert_path, &cfg.key_path) else {
        return Ok(None);
    };
    let chain = certificates("server.tls.cert_path", cert_path)?;
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| {
        TlsError::new(
            "server.tls.key_path",
            format!("cannot read a private key from {}: {e}", key_path.display()),
        )
    })?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::new("server.tls.cert_path", e.to_string()))?;
    let builder = match &cfg.client_ca_path {
        None => builder.with_no_client_auth(),
        Some(ca_path) => {
            let mut roots = RootCertStore::empty();
            for ca in certificates("server.tls.client_ca_path", ca_path)? {
                roots.add(ca).map_err(|e| {
                    TlsError::new(
                        "server.tls.client_ca_path",
                        format!("{}: not a usable CA certificate: {e}", ca_path.display()),
                    )
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider());
            let verifier = if cfg.require_client_cert {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            let verifier = verifier
                .build()
                .map_err(|e| TlsError::new("server.tls.client_ca_path", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut server = builder.with_single_cert(chain, key).map_err(|e| {
        TlsError::new(
            "server.tls.key_path",
            format!(
                "{} and {} do not make a usable certificate: {e}",
                cert_path.display(),
                key_path.display()
            ),
        )
    })?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(server))))
}
