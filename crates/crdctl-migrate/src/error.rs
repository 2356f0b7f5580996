//! Why an operation could not run or finish.

use crate::api::CallError;

/// Why a migration or retirement could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{what}: {source}")]
    Call {
        /// What was being done.
        what: String,
        /// The failure.
        source: CallError,
    },
    /// The CRD is not in a state the operation can start from.
    #[error("{0}")]
    Refused(String),
    /// The progress record could not be read or written.
    #[error("progress record {path}: {message}")]
    Record {
        /// The record file.
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
}

impl Error {
    pub(crate) fn call(what: impl Into<String>) -> impl FnOnce(CallError) -> Error {
        let what = what.into();
        move |source| Error::Call { what, source }
    }
}
