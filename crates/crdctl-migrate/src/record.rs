//! The progress record that makes a migration resumable: a small JSON file per CRD, written
//! after each finished page and removed when the migration finishes.
//!
//! It lives in `$XDG_STATE_HOME/crdctl/migrations/` (by default
//! `~/.local/state/crdctl/migrations/`), or the directory given with `--state-dir`, named
//! `<crd name>.<crd uid>.json`: a CRD deleted and created again starts over. A record is used
//! only for the server and storage version it was written for. Each write goes to a temporary
//! file that is synced and renamed over the old one, so a crash leaves the old record or the
//! new one, never a torn one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// What a finished page leaves behind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The API server's URL.
    pub server: String,
    /// The CRD's name.
    pub crd: String,
    /// The CRD's uid.
    pub uid: String,
    /// The storage version objects are being rewritten to.
    pub storage_version: String,
    /// The last object of the last finished page (`namespace/name`, or `name`); every object
    /// up to it in list order has been rewritten.
    pub last_key: Option<String>,
    /// Objects handled in finished pages.
    pub done: u64,
}

/// The default directory of records.
pub fn default_dir() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/state")))?;
    Some(state.join("crdctl").join("migrations"))
}

/// The record file of a CRD in `dir`.
pub fn path(dir: &Path, crd: &str, uid: &str) -> PathBuf {
    dir.join(format!("{crd}.{uid}.json"))
}

fn record_error(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::Record { path: path.to_path_buf(), message: message.to_string() }
}

/// Reads a record; `None` if there is none.
pub fn load(path: &Path) -> Result<Option<Record>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|err| record_error(path, err)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(record_error(path, err)),
    }
}

/// Replaces the record atomically.
pub fn save(path: &Path, record: &Record) -> Result<(), Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|err| record_error(path, err))?;
    let temporary = path.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&serde_json::to_vec_pretty(record)?)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        // The rename is durable once the directory is.
        std::fs::File::open(dir)?.sync_all()
    };
    write().map_err(|err| record_error(path, err))
}

/// Removes the record of a finished migration.
pub fn remove(path: &Path) -> Result<(), Error> {
    match std::fs::remove_file(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(record_error(path, err)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_record_loads_back_and_removal_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path(), "crontabs.example.com", "u-1");
        assert_eq!(load(&file).unwrap(), None);
        let record = Record {
            crd: "crontabs.example.com".into(),
            last_key: Some("default/a".into()),
            done: 500,
            ..Default::default()
        };
        save(&file, &record).unwrap();
        save(&file, &Record { done: 1000, ..record.clone() }).unwrap();
        assert_eq!(load(&file).unwrap().unwrap().done, 1000);
        std::fs::write(&file, b"{torn").unwrap();
        assert!(matches!(load(&file), Err(Error::Record { .. })));
        remove(&file).unwrap();
        remove(&file).unwrap();
        assert_eq!(load(&file).unwrap(), None);
    }
}
