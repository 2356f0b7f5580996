//! What a client presents as credentials: a bearer token (the server's, a static one, a
//! ServiceAccount token with any claims, or garbage), impersonation headers, and a static
//! token file. None may panic; a token this server signed verifies, a changed one does not.
#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue};
use crdctl_server::auth::{Authenticator, Authorizer, Mode, impersonate, token_file};
use crdctl_server::auth::token::{TokenSigner, account};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let signer = TokenSigner::with_key(b"fuzz-key-fuzz-key-fuzz-key-fuzz!").unwrap();
    match data.split_first() {
        // Claims: signed, the token verifies; one byte changed, it does not.
        Some((0, claims)) => {
            if let Ok(claims) = serde_json::from_slice::<serde_json::Value>(claims) {
                let token = signer.sign(&claims);
                let _ = account(&signer, &token);
                let mut changed = token.into_bytes();
                if let Some(last) = changed.last_mut() {
                    *last = if *last == b'A' { b'B' } else { b'A' };
                }
                assert!(signer.verify(&String::from_utf8_lossy(&changed), 0).is_none(), "a changed token verified");
            }
        }
        // A token file.
        Some((1, text)) => {
            let _ = token_file::parse(text, "fuzz.csv");
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
            let authenticator = Authenticator::new(signer, Some("admin".into()), None, true).unwrap();
            if let Ok(user) = authenticator.authenticate(&headers) {
                let _ = impersonate(&Authorizer::new(Mode::Rbac), user, &headers);
            }
        }
    }
});
