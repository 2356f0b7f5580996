//! Where the tests and benchmarks find the real programs they run against — etcd, kubectl of
//! each release, Helm 4, GNU time — and the SARIF schema: one folder, `$CRDCTL_PEERS` (default
//! `~/.cache/crdctl/peers`), which `scripts/peers` fills from the package registries.
//!
//! A missing peer is an error that names the script; nothing falls back to whatever happens to
//! be on the `PATH`, so every run tests the versions the script pins.

use std::path::PathBuf;

/// The environment variable naming the peers' folder.
pub const ENV: &str = "CRDCTL_PEERS";

/// The peers' folder: `$CRDCTL_PEERS`, else `$XDG_CACHE_HOME/crdctl/peers`, else
/// `$HOME/.cache/crdctl/peers` — the script's default.
pub fn folder() -> PathBuf {
    if let Some(dir) = std::env::var_os(ENV) {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("crdctl").join("peers")
}

/// The peer program `name` (`etcd`, `kubectl.1.35`, `helm`, `time`), or an error that says how
/// to install it.
pub fn binary(name: &str) -> std::io::Result<PathBuf> {
    file(&format!("bin/{name}"))
}

/// A file the script installs, by its path in the folder (`schemas/sarif-2.1.0.json`), or an
/// error that says how to install it.
pub fn file(relative: &str) -> std::io::Result<PathBuf> {
    let path = folder().join(relative);
    if path.is_file() {
        Ok(path)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} is missing: run scripts/peers, which installs the test peers into ${ENV}", path.display()),
        ))
    }
}
