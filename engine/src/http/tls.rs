//! The server's TLS identity: a certificate chain and its private key, read from PEM files
//! once at start-up (rustls with aws-lc-rs; no OpenSSL).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why the certificate or key files cannot serve TLS. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid PEM.
    #[error("{}: not valid PEM: {message}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the PEM reader said.
        message: String,
    },
    /// The certificate file holds no certificate.
    #[error("{}: no certificate in it (expected a PEM `BEGIN CERTIFICATE` block)", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The key file holds no private key.
    #[error("{}: no private key in it (expected a PEM `BEGIN PRIVATE KEY`, `BEGIN RSA PRIVATE KEY` or `BEGIN EC PRIVATE KEY` block)", path.display())]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// Both files read, but rustls refused them together (an unsupported key, or a key
    /// that does not belong to the certificate).
    #[error("the certificate {} and the key {} cannot serve TLS: {message}", cert.display(), key.display())]
    Rejected {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls said.
        message: String,
    },
}

/// A loaded TLS identity for the server. Built only by [`ServerTls::from_pem_files`], so
/// a `ServerTls` always holds a certificate chain and the private key of its first
/// certificate.
#[derive(Clone)]
pub struct ServerTls {
    pub(crate) config: Arc<rustls::ServerConfig>,
    cert: PathBuf,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads `cert` (PEM: the server's certificate first, then any intermediates) and
    /// `key` (PEM: PKCS#8, PKCS#1 or SEC1 private key) and checks that the key belongs to
    /// the certificate. TLS 1.2 and 1.3, ALPN `http/1.1`, no client certificates.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<ServerTls, TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                path: path.to_owned(),
                source,
            })
        };
        let cert_pem = read(cert)?;
        let key_pem = read(key)?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Pem {
                path: cert.to_owned(),
                message: e.to_string(),
            })?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate {
                path: cert.to_owned(),
            });
        }
        let private_key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
            rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey {
                path: key.to_owned(),
            },
            other => TlsError::Pem {
                path: key.to_owned(),
                message: other.to_string(),
            },
        })?;
        let rejected = |e: rustls::Error| TlsError::Rejected {
            cert: cert.to_owned(),
            key: key.to_owned(),
            message: e.to_string(),
        };
        // The provider is named rather than taken from the process default: more than one
        // may be compiled in (reqwest's), and then rustls has no default to pick.
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(rejected)?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(rejected)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerTls {
            config: Arc::new(config),
            cert: cert.to_owned(),
        })
    }

    /// The certificate file it was read from.
    pub fn cert_path(&self) -> &Path {
        &self.cert
    }
}
