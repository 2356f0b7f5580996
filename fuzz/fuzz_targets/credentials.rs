//! What a client presents as credentials: a bearer token (the server's, a static one, a
//! ServiceAccount token with any claims, or garbage), a client certificate (any DER),
//! impersonation headers, and a static token file. None may panic; a token this server signed
//! verifies, a changed one does not.
#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue};
use crdctl_server::auth::{Authenticator, Authorizer, Mode, impersonate, token_file, x509};
use crdctl_server::auth::token::{ISSUER, TokenSigner, account};

static SIGNER: std::sync::LazyLock<TokenSigner> = std::sync::LazyLock::new(|| TokenSigner::generate().unwrap().0);

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let signer = SIGNER.clone();
    match data.split_first() {
        // Claims: signed, the token verifies; one byte changed, it does not.
        Some((0, claims)) => {
            if let Ok(claims) = serde_json::from_slice::<serde_json::Value>(claims) {
                let token = signer.sign(&claims);
                let _ = account(&signer, &token, &[ISSUER.to_string()]);
                let mut changed = token.into_bytes();
                if let Some(last) = changed.last_mut() {
                    *last = if *last == b'A' { b'B' } else { b'A' };
                }
                assert!(signer.verify(&String::from_utf8_lossy(&changed), 0).is_err(), "a changed token verified");
            }
        }
        // A token file.
        Some((1, text)) => {
            let _ = token_file::parse(text, "fuzz.csv");
        }
        // A client certificate's DER, as TLS would hand it over.
        Some((2, der)) => {
            let _ = x509::user(der);
        }
        // Headers: `name: value` lines, the bearer token and the impersonation among them.
        _ => {
            let mut headers = HeaderMap::new();
            for line in data.split(|b| *b == b'\n') {
                let Some(colon) = line.iter().position(|b| *b == b':') else { continue };
                let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
                if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
                    headers.append(name, value);
                }
            }
            let authenticator = Authenticator::new(signer, Some("admin".into()), None, true, false).unwrap();
            if let Ok(user) = authenticator.authenticate(None, &headers) {
                let _ = impersonate(&Authorizer::new(Mode::Rbac), user, &headers);
            }
        }
    }
});
