//! Client certificates, as kube-apiserver's x509 authenticator: a certificate that chains to a
//! client CA is the user its subject names (common name = user, organizations = groups).
//!
//! TLS verifies the chain (rustls, against the server's own client CA and any
//! `--client-ca-file`); this module reads the verified certificate's subject, keeps the
//! server's own CA in the store (the Secret `kube-system/crdctl-client-ca`, so every replica
//! trusts the certificates any of them issued), and issues certificates with it: the
//! administrator's, which the kubeconfig `crdctl serve` writes carries.

use std::path::Path;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

use super::User;

/// Who a verified client certificate names: its subject's common name, in its organizations;
/// none when it has no common name (upstream then tries the other authenticators).
pub fn user(der: &[u8]) -> Option<User> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = certificate.subject();
    let name = subject.iter_common_name().next()?.as_str().ok().filter(|name| !name.is_empty())?;
    let groups: Vec<&str> = subject.iter_organization().filter_map(|o| o.as_str().ok()).collect();
    Some(User::named(name, &groups))
}

/// The server's client CA: it signs the certificates the server hands out.
pub struct ClientCa {
    /// The CA certificate, PEM.
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("ClientCa").finish_non_exhaustive()
    }
}

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Issued").field("cert_pem", &self.cert_pem).finish_non_exhaustive()
    }
}

const CERT_FIELD: &str = "tls.crt";
const KEY_FIELD: &str = "tls.key";

impl ClientCa {
    /// A new CA.
    pub fn generate() -> Result<ClientCa, String> {
        let key = KeyPair::generate().map_err(cannot)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(cannot)?;
        params.distinguished_name.push(DnType::CommonName, "crdctl client CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key).map_err(cannot)?;
        Ok(ClientCa { cert_pem: cert.pem(), issuer: Issuer::new(params, key) })
    }

    /// The CA from its certificate and key, PEM.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<ClientCa, String> {
        let key = KeyPair::from_pem(key_pem).map_err(cannot)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key).map_err(cannot)?;
        Ok(ClientCa { cert_pem: cert_pem.to_string(), issuer })
    }

    /// The store's CA, created if there is none yet.
    pub async fn load_or_create(store: &dyn crdctl_storage::Store) -> Result<ClientCa, String> {
        use base64::Engine;
        let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        let fresh = ClientCa::generate()?;
        let data = json!({CERT_FIELD: encode(&fresh.cert_pem), KEY_FIELD: encode(&fresh.issuer.key().serialize_pem())});
        super::kept_secret(store, "crdctl-client-ca", (fresh, data), |data| {
            let field = |name: &str| {
                let encoded = data.get(name).and_then(Value::as_str)?;
                String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded).ok()?).ok()
            };
            ClientCa::from_pem(&field(CERT_FIELD)?, &field(KEY_FIELD)?).ok()
        })
        .await
    }

    /// A client certificate for `user` in `group` (rcgen writes one organization per subject;
    /// certificates made elsewhere may name more), valid for a year.
    pub fn issue(&self, user: &str, group: Option<&str>) -> Result<Issued, String> {
        let key = KeyPair::generate().map_err(cannot)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(cannot)?;
        params.distinguished_name.push(DnType::CommonName, user);
        if let Some(group) = group {
            params.distinguished_name.push(DnType::OrganizationName, group);
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let now = time::OffsetDateTime::now_utc();
        // A minute back, for clocks a little behind ours.
        params.not_before = now - time::Duration::minutes(1);
        params.not_after = now + time::Duration::days(365);
        let cert = params.signed_by(&key, &self.issuer).map_err(cannot)?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

fn cannot(err: rcgen::Error) -> String {
    format!("client certificates: {err}")
}

/// The TLS configuration of a server with `cert` and `key` (PEM files) that asks clients for
/// a certificate and accepts those that chain to one of `client_cas` (PEM), and clients without
/// one (they authenticate otherwise), as kube-apiserver's `VerifyClientCertIfGiven`.
pub fn server_config(cert: &Path, key: &Path, client_cas: &[String]) -> Result<rustls::ServerConfig, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|err| format!("{}: {err}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|err| format!("{}: {err}", key.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for pem in client_cas {
        for ca in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(ca.map_err(|err| format!("client CA: {err}"))?).map_err(|err| format!("client CA: {err}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
        .allow_unauthenticated()
        .build()
        .map_err(|err| format!("client CA: {err}"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| err.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|err| format!("{}: {err}", cert.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl req -x509 -newkey ec -subj "/CN=jane/O=dev/O=ops"`.
    const TWO_ORGANIZATIONS: &str = "-----BEGIN CERTIFICATE-----
MIIBrTCCAVOgAwIBAgIUNoCJa+kwdtVRw7Weq9ryEG18kZAwCgYIKoZIzj0EAwIw
KzENMAsGA1UEAwwEamFuZTEMMAoGA1UECgwDZGV2MQwwCgYDVQQKDANvcHMwIBcN
MjYxMjA1MjAzMDQ5WhgPMjEyNjExMTEyMDMwNDlaMCsxDTALBgNVBAMMBGphbmUx
DDAKBgNVBAoMA2RldjEMMAoGA1UECgwDb3BzMFkwEwYHKoZIzj0CAQYIKoZIzj0D
AQcDQgAE2sCUlAUWMTsC0/C5453nebVCUzTScXZwZL9nvCHpFD+eMxRGAJeipuvX
tfZTPPK5510qzFYGfOslT46G/Ds54KNTMFEwHQYDVR0OBBYEFNrTGdEqPGJK9o2m
e12RmI/iR3E9MB8GA1UdIwQYMBaAFNrTGdEqPGJK9o2me12RmI/iR3E9MA8GA1Ud
EwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIgN3JUgOoK7+WMf+lRJnXnKl55
eU1TAGnMxrLNp/G6ODcCIQDf13rwZEe5LO8/acFU9huLTQVkWTJd0CObmfW/BK6o
MA==
-----END CERTIFICATE-----
";

    fn user_of(pem: &str) -> Option<User> {
        user(&CertificateDer::from_pem_slice(pem.as_bytes()).unwrap())
    }

    #[test]
    fn a_certificate_is_its_common_name_in_its_organizations() {
        let jane = user_of(TWO_ORGANIZATIONS).unwrap();
        assert_eq!(jane, User::named("jane", &["dev", "ops"]));
        let ca = ClientCa::generate().unwrap();
        let again = ClientCa::from_pem(&ca.cert_pem, &ca.issuer.key().serialize_pem()).unwrap();
        let bob = user_of(&again.issue("bob", Some("dev")).unwrap().cert_pem).unwrap();
        assert_eq!(bob, User::named("bob", &["dev"]));
        assert_eq!(user_of(&again.issue("", Some("dev")).unwrap().cert_pem), None, "no common name");
        assert_eq!(user(b"not a certificate"), None);
    }
}
