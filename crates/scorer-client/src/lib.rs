//! How a client of the scoring service (the telemetry agent, a router, the
//! testbed) proves who it is: the bearer token of its role, the CA that
//! signed the service's certificate, and optionally a client certificate
//! for mTLS. The same options for every binary ([`CredentialArgs`]), read
//! once into [`Credentials`], applied to a `reqwest` client builder.
//!
//! Only the CAs given are trusted for `https://` (this build has no system
//! root store): a deployment's service certificate comes from its own CA.

use std::path::{Path, PathBuf};

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};

/// Environment variable holding the bearer token (beats a command-line
/// value, which other users can read in the process list).
pub const TOKEN_ENV: &str = "SCORER_TOKEN";

/// A credential that cannot be used; the message names the option and file.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// A file could not be read.
    #[error("{option} {path}: {source}")]
    Read {
        /// The option naming the file.
        option: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file's content is not what the option needs.
    #[error("{option} {path}: {reason}")]
    Invalid {
        /// The option naming the file.
        option: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The token is empty or cannot be sent in a header.
    #[error("the bearer token {0}")]
    BadToken(&'static str),
    /// An `https://` URL without a CA to check the service's certificate.
    #[error(
        "{0} is https:// but no --ca-file was given: this build trusts only the CAs it is given"
    )]
    NoCa(String),
}

/// Command-line options of a client, for `#[command(flatten)]`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CredentialArgs {
    /// Bearer token of this client's role (`agent` for telemetry, `router`
    /// for scoring and feedback). Better set as SCORER_TOKEN or in
    /// --token-file, out of the process list.
    #[arg(long, value_name = "TOKEN", env = TOKEN_ENV, hide_env_values = true)]
    pub token: Option<String>,
    /// File whose first line is the bearer token.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// PEM CA certificate(s) that signed the service's certificate, for an
    /// https:// service URL.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate, for a service that verifies client
    /// certificates (mTLS); with --key-file.
    #[arg(long, value_name = "FILE", requires = "key_file")]
    pub cert_file: Option<PathBuf>,
    /// PEM private key of --cert-file (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "cert_file")]
    pub key_file: Option<PathBuf>,
}

/// Credentials read and checked, ready to apply to clients.
#[derive(Clone, Default)]
pub struct Credentials {
    authorization: Option<HeaderValue>,
    roots: Vec<reqwest::Certificate>,
    identity: Option<reqwest::Identity>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("token", &self.authorization.as_ref().map(|_| "<redacted>"))
            .field("cas", &self.roots.len())
            .field("client_certificate", &self.identity.is_some())
            .finish()
    }
}

fn read(option: &'static str, path: &Path) -> Result<Vec<u8>, CredentialsError> {
    std::fs::read(path).map_err(|source| CredentialsError::Read {
        option,
        path: path.to_owned(),
        source,
    })
}

fn invalid(option: &'static str, path: &Path, reason: impl ToString) -> CredentialsError {
    CredentialsError::Invalid {
        option,
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

impl Credentials {
    /// No token, no CA, no client certificate: plain HTTP on loopback.
    pub fn none() -> Self {
        Self::default()
    }

    /// Reads the files `args` names.
    ///
    /// # Errors
    /// A file that cannot be read or holds no usable token, certificate or key.
    pub fn from_args(args: &CredentialArgs) -> Result<Self, CredentialsError> {
        let mut c = Self::none();
        if let Some(t) = &args.token {
            c = c.with_token(t)?;
        }
        if let Some(path) = &args.token_file {
            let text = read("--token-file", path)?;
            let text =
                String::from_utf8(text).map_err(|_| invalid("--token-file", path, "not UTF-8"))?;
            let first = text.lines().next().unwrap_or("").trim();
            c = c
                .with_token(first)
                .map_err(|e| invalid("--token-file", path, e))?;
        }
        if let Some(path) = &args.ca_file {
            let pem = read("--ca-file", path)?;
            let roots = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| invalid("--ca-file", path, e))?;
            if roots.is_empty() {
                return Err(invalid("--ca-file", path, "holds no PEM CERTIFICATE block"));
            }
            c.roots = roots;
        }
        if let (Some(cert), Some(key)) = (&args.cert_file, &args.key_file) {
            let mut pem = read("--cert-file", cert)?;
            pem.push(b'\n');
            pem.extend(read("--key-file", key)?);
            c.identity = Some(
                reqwest::Identity::from_pem(&pem).map_err(|e| invalid("--cert-file", cert, e))?,
            );
        }
        Ok(c)
    }

    /// These credentials with `token` as the bearer token.
    ///
    /// # Errors
    /// An empty token, or one with characters a header cannot carry.
    pub fn with_token(mut self, token: &str) -> Result<Self, CredentialsError> {
        if token.is_empty() {
            return Err(CredentialsError::BadToken("is empty"));
        }
        let mut v = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| CredentialsError::BadToken("has characters a header cannot carry"))?;
        v.set_sensitive(true);
        self.authorization = Some(v);
        Ok(self)
    }

    /// Whether a bearer token is sent.
    pub fn has_token(&self) -> bool {
        self.authorization.is_some()
    }

    /// Checks that `url` can be reached with these credentials.
    ///
    /// # Errors
    /// [`CredentialsError::NoCa`] for an `https://` URL without a CA.
    pub fn check_url(&self, url: &str) -> Result<(), CredentialsError> {
        if url.starts_with("https://") && self.roots.is_empty() {
            return Err(CredentialsError::NoCa(url.to_owned()));
        }
        Ok(())
    }

    /// `builder` sending the token on every request (marked sensitive, so
    /// never logged), trusting the CAs, presenting the client certificate.
    pub fn apply(&self, mut builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        if let Some(v) = &self.authorization {
            let mut headers = HeaderMap::new();
            headers.insert(AUTHORIZATION, v.clone());
            builder = builder.default_headers(headers);
        }
        for root in &self.roots {
            builder = builder.add_root_certificate(root.clone());
        }
        if let Some(id) = &self.identity {
            builder = builder.identity(id.clone());
        }
        builder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_gives_its_first_line_and_refuses_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "router-token-0123456789\n").unwrap();
        let args = CredentialArgs {
            token_file: Some(path.clone()),
            ..CredentialArgs::default()
        };
        let c = Credentials::from_args(&args).unwrap();
        assert!(c.has_token());
        assert_eq!(
            c.authorization.as_ref().unwrap().to_str().unwrap(),
            "Bearer router-token-0123456789"
        );
        assert!(!format!("{c:?}").contains("0123456789"));
        std::fs::write(&path, "\n").unwrap();
        let e = Credentials::from_args(&args).unwrap_err().to_string();
        assert!(e.contains("--token-file") && e.contains("empty"), "{e}");
    }

    #[test]
    fn files_that_do_not_load_name_their_option() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "no certificate here").unwrap();
        let args = CredentialArgs {
            ca_file: Some(ca),
            ..CredentialArgs::default()
        };
        let e = Credentials::from_args(&args).unwrap_err().to_string();
        assert!(e.starts_with("--ca-file"), "{e}");
        let missing = CredentialArgs {
            token_file: Some(dir.path().join("absent")),
            ..CredentialArgs::default()
        };
        let e = Credentials::from_args(&missing).unwrap_err().to_string();
        assert!(e.starts_with("--token-file"), "{e}");
        assert!(
            Credentials::none()
                .with_token("a\nb")
                .unwrap_err()
                .to_string()
                .contains("header")
        );
    }

    #[test]
    fn https_needs_a_ca() {
        let none = Credentials::none();
        assert!(none.check_url("http://127.0.0.1:8080").is_ok());
        let e = none.check_url("https://scorer.internal:8443").unwrap_err();
        assert!(e.to_string().contains("--ca-file"), "{e}");
    }
}
