//! `[server.tls]`: serve HTTPS with rustls, and optionally verify client
//! certificates (mTLS). The files are read at start and again on every
//! reload (`SIGHUP` or `POST /v1/admin/reload`), so a renewed certificate
//! takes effect without a restart; a reload whose files do not load is
//! refused and changes nothing.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[server.tls]` section. TLS is on when `cert_path` is set.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM file with the server's certificate chain, leaf first.
    pub cert_path: Option<PathBuf>,
    /// PEM file with the certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key_path: Option<PathBuf>,
    /// PEM file of the CA certificates that client certificates must chain
    /// to. When set, a client may authenticate with a certificate instead of
    /// a bearer token; `[auth.certificates]` gives each name its role.
    pub client_ca_path: Option<PathBuf>,
    /// Refuse the handshake of a client without a certificate signed by
    /// `client_ca_path`. Default false: tokens still work beside certificates.
    pub require_client_cert: bool,
}

impl TlsConfig {
    /// Whether the listener serves TLS.
    pub fn enabled(&self) -> bool {
        self.cert_path.is_some()
    }

    /// Whether client certificates are verified.
    pub fn verifies_clients(&self) -> bool {
        self.enabled() && self.client_ca_path.is_some()
    }

    /// Checks that the keys come in the combinations that make sense (the
    /// files themselves are read by the server).
    ///
    /// # Errors
    /// The first offending dotted key and what is wrong with it.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        match (&self.cert_path, &self.key_path) {
            (Some(_), None) => {
                return Err((
                    "server.tls.key_path",
                    "is needed with server.tls.cert_path".to_owned(),
                ));
            }
            (None, Some(_)) => {
                return Err((
                    "server.tls.cert_path",
                    "is needed with server.tls.key_path".to_owned(),
                ));
            }
            _ => {}
        }
        if self.client_ca_path.is_some() && !self.enabled() {
            return Err((
                "server.tls.client_ca_path",
                "client certificates need TLS: set server.tls.cert_path and key_path".to_owned(),
            ));
        }
        if self.require_client_cert && self.client_ca_path.is_none() {
            return Err((
                "server.tls.require_client_cert",
                "needs server.tls.client_ca_path to verify the certificates against".to_owned(),
            ));
        }
        for (key, p) in [
            ("server.tls.cert_path", &self.cert_path),
            ("server.tls.key_path", &self.key_path),
            ("server.tls.client_ca_path", &self.client_ca_path),
        ] {
            if p.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return Err((key, "must not be empty".to_owned()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_in_working_combinations() {
        let mut t = TlsConfig::default();
        assert!(t.validate().is_ok() && !t.enabled());
        t.cert_path = Some("c.pem".into());
        assert_eq!(t.validate().unwrap_err().0, "server.tls.key_path");
        t.key_path = Some("k.pem".into());
        assert!(t.validate().is_ok() && t.enabled() && !t.verifies_clients());
        t.require_client_cert = true;
        assert_eq!(
            t.validate().unwrap_err().0,
            "server.tls.require_client_cert"
        );
        t.client_ca_path = Some("ca.pem".into());
        assert!(t.validate().is_ok() && t.verifies_clients());
        let only_ca = TlsConfig {
            client_ca_path: Some("ca.pem".into()),
            ..TlsConfig::default()
        };
        assert_eq!(
            only_ca.validate().unwrap_err().0,
            "server.tls.client_ca_path"
        );
    }
}
