//! A certificate authority of the test's own (rcgen) and the server certificates it signs,
//! written as PEM files into a temp dir of their own (deleted when the CA is dropped).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

/// A test CA: its certificate in `ca.pem`, and a key to sign server certificates with.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
}

/// A server certificate signed by a [`TestCa`], and its key, as files.
#[derive(Debug, Clone)]
pub struct ServerCert {
    /// The certificate (PEM).
    pub cert_pem: String,
    /// The private key (PEM, PKCS#8).
    pub key_pem: String,
    /// Where `cert_pem` is written.
    pub cert_path: PathBuf,
    /// Where `key_pem` is written.
    pub key_path: PathBuf,
}

impl TestCa {
    /// A new CA named `name` (its subject's common name), with `ca.pem` written.
    pub fn new(name: &str) -> TestCa {
        let dir =
            std::env::temp_dir().join(format!("onceflow_tls_{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("create the CA's directory");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        let ca = TestCa { issuer, dir };
        std::fs::write(ca.ca_path(), ca.ca_pem()).expect("write ca.pem");
        ca
    }

    /// The CA's certificate (PEM).
    pub fn ca_pem(&self) -> String {
        self.issuer.pem()
    }

    /// The file holding [`TestCa::ca_pem`].
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The directory of this CA's files (for a test's own extra files).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A server certificate for `localhost` and `127.0.0.1`, signed by this CA, written as
    /// `{name}.crt` and `{name}.key`.
    pub fn issue(&self, name: &str) -> ServerCert {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .expect("server params");
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "localhost");
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("server key");
        let cert = params
            .signed_by(&key, &*self.issuer)
            .expect("sign the server certificate");
        let server = ServerCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_path: self.dir.join(format!("{name}.crt")),
            key_path: self.dir.join(format!("{name}.key")),
        };
        std::fs::write(&server.cert_path, &server.cert_pem).expect("write the certificate");
        std::fs::write(&server.key_path, &server.key_pem).expect("write the key");
        server
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
