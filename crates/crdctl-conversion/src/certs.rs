//! Certificates for a conversion webhook: a CA and a serving certificate, and the `caBundle`
//! (base64 of the CA's PEM) that the CRD's `clientConfig` needs.

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// A CA and a certificate it signed.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The serving certificate, PEM.
    pub cert_pem: String,
    /// The serving certificate's private key, PEM.
    pub key_pem: String,
}

impl Bundle {
    /// The value for `clientConfig.caBundle`.
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }
}

/// The DNS names a Service is reached by: `<name>.<namespace>.svc` first, as the API server checks.
pub fn service_names(name: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{name}.{namespace}.svc"),
        format!("{name}.{namespace}.svc.cluster.local"),
        format!("{name}.{namespace}"),
    ]
}

/// A new CA and a serving certificate for `names` (DNS names or IP addresses).
pub fn generate(names: &[String]) -> Result<Bundle, String> {
    let err = |e: rcgen::Error| format!("cannot generate certificates: {e}");
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.distinguished_name.push(DnType::CommonName, "crdctl webhook CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;

    let key = KeyPair::generate().map_err(err)?;
    let mut serving = CertificateParams::new(names.to_vec()).map_err(err)?;
    serving.distinguished_name.push(DnType::CommonName, names.first().map(String::as_str).unwrap_or("webhook"));
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let issuer = Issuer::from_params(&ca, &ca_key);
    let cert = serving.signed_by(&key, &issuer).map_err(err)?;
    Ok(Bundle { ca_pem: ca_cert.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}
