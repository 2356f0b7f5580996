//! Reading CRDs from files, directories, standard input and strings.
//!
//! Every input is bounded before it is parsed: at most [`MAX_INPUT_BYTES`] per file, valid UTF-8,
//! and the YAML budget of [`crate::yaml`]. Non-CRD documents in a stream are skipped, so a whole
//! release manifest can be passed as is. v1beta1 documents are normalised to v1 on load.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::crd::{API_VERSION_V1, API_VERSION_V1BETA1, Conversion, CustomResourceDefinition, KIND};
use crate::normalize::{self, LegacyLayout, Relocation};
use crate::yaml::{self, Position, Positions};

/// Largest input accepted, per file. The API server caps a request at 3 MiB; bundles of many
/// CRDs are larger, so this leaves ten times that.
pub const MAX_INPUT_BYTES: u64 = 32 << 20;

/// The file name used for standard input.
pub const STDIN_NAME: &str = "<stdin>";

/// Failure to read CRD manifests. Each variant names the file and, where known, the position.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_INPUT_BYTES`].
    #[error("{path}: file is larger than the {limit_mib} MiB input limit")]
    TooLarge {
        /// The file.
        path: String,
        /// The limit in MiB.
        limit_mib: u64,
    },
    /// The file is not UTF-8.
    #[error("{path}:{position}: invalid UTF-8 (byte offset {offset})")]
    InvalidUtf8 {
        /// The file.
        path: String,
        /// Where the first invalid byte is.
        position: Position,
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// The file is not valid YAML or JSON, or breaks the parser's limits.
    #[error("{path}:{}: {message}", display_position(*.position))]
    Syntax {
        /// The file.
        path: String,
        /// Where, when known.
        position: Option<Position>,
        /// What is wrong.
        message: String,
    },
    /// A CRD field has the wrong type (`served: "yes"`).
    #[error("{path}:{position}: {field}: {message}")]
    Field {
        /// The file.
        path: String,
        /// Where the field is.
        position: Position,
        /// The field path, e.g. `spec.versions[0].served`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A file named explicitly holds no CustomResourceDefinition.
    #[error("{path}:{position}: no CustomResourceDefinition found{}", if *.empty { " (the file is empty)" } else { "" })]
    NoCrd {
        /// The file.
        path: String,
        /// Where the file's content starts.
        position: Position,
        /// Whether the file has no documents at all.
        empty: bool,
    },
}

fn display_position(position: Option<Position>) -> String {
    position.map_or_else(|| "1".to_string(), |p| p.to_string())
}

/// Where a CRD came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// File name as given (or [`STDIN_NAME`]).
    pub file: Arc<str>,
    /// Zero-based document index in the file.
    pub document: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)
    }
}

/// The `apiVersion` a CRD was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceApiVersion {
    /// `apiextensions.k8s.io/v1`.
    V1,
    /// `apiextensions.k8s.io/v1beta1`, normalised to v1 on load.
    V1beta1,
}

/// A loaded CustomResourceDefinition: its v1 document, a typed view, and source positions.
#[derive(Debug, Clone)]
pub struct Crd {
    /// Where it came from.
    pub origin: Origin,
    /// What the file said.
    pub source_api_version: SourceApiVersion,
    /// The whole document in v1 form; nothing the user wrote is dropped.
    pub value: Value,
    /// Typed view of `value`, with the API server's v1 defaults applied.
    pub definition: CustomResourceDefinition,
    /// The v1beta1 layout, for v1beta1 input.
    pub legacy: Option<LegacyLayout>,
    /// The text of the file it was loaded from, which positions point into (empty for a CRD
    /// made in code).
    pub text: Arc<str>,
    positions: Positions,
    relocations: Vec<Relocation>,
}

impl Crd {
    /// Builds a CRD from a JSON document (v1 or v1beta1) with no source positions.
    ///
    /// Use this for CRDs made in code, e.g. with kube-rs' `CustomResourceExt::crd()` serialised by
    /// `serde_json::to_value`.
    pub fn from_value(name: &str, value: Value) -> Result<Crd, LoadError> {
        let document = yaml::Document { index: 0, value, positions: Positions::default() };
        Crd::from_document(Arc::from(name), Arc::from(""), document)
    }

    /// The CRD's `metadata.name`.
    pub fn name(&self) -> &str {
        &self.definition.metadata.name
    }

    /// Where the node at `pointer` (in the v1 form) was written, or its nearest written ancestor.
    pub fn position(&self, pointer: &str) -> Option<Position> {
        let relocated = self
            .relocations
            .iter()
            .filter(|r| yaml::is_within(pointer, &r.v1_prefix))
            .max_by_key(|r| r.v1_prefix.len())
            .map(|r| format!("{}{}", r.source_prefix, pointer.get(r.v1_prefix.len()..).unwrap_or_default()));
        self.positions.nearest(relocated.as_deref().unwrap_or(pointer))
    }

    /// The `openAPIV3Schema` of the version at `version_idx`.
    pub fn schema(&self, version_idx: usize) -> Option<&Value> {
        self.value.pointer(&format!("/spec/versions/{version_idx}/schema/openAPIV3Schema"))
    }

    fn from_document(file: Arc<str>, text: Arc<str>, document: yaml::Document) -> Result<Crd, LoadError> {
        let origin = Origin { file, document: document.index };
        let source_api_version = match document.value.get("apiVersion").and_then(Value::as_str) {
            Some(API_VERSION_V1BETA1) => SourceApiVersion::V1beta1,
            _ => SourceApiVersion::V1,
        };
        let (value, relocations, legacy) = match source_api_version {
            SourceApiVersion::V1 => (document.value, Vec::new(), None),
            SourceApiVersion::V1beta1 => {
                let normalized = normalize::to_v1(document.value);
                (normalized.value, normalized.relocations, Some(normalized.legacy))
            }
        };
        let mut crd = Crd {
            origin,
            source_api_version,
            definition: CustomResourceDefinition::default(),
            value,
            legacy,
            text,
            positions: document.positions,
            relocations,
        };
        crd.definition = match serde_path_to_error::deserialize::<_, CustomResourceDefinition>(&crd.value) {
            Ok(definition) => definition,
            Err(err) => {
                let (field, pointer) = field_and_pointer(err.path());
                return Err(LoadError::Field {
                    path: crd.origin.file.to_string(),
                    position: crd.position(&pointer).unwrap_or_default(),
                    field,
                    message: err.into_inner().to_string(),
                });
            }
        };
        apply_v1_defaults(&mut crd.definition);
        Ok(crd)
    }
}

/// The defaults the API server applies to every v1 CRD before validating it.
fn apply_v1_defaults(definition: &mut CustomResourceDefinition) {
    let names = &mut definition.spec.names;
    if names.singular.is_empty() {
        names.singular = names.kind.to_lowercase();
    }
    if names.list_kind.is_empty() && !names.kind.is_empty() {
        names.list_kind = format!("{}List", names.kind);
    }
    let conversion =
        definition.spec.conversion.get_or_insert_with(|| Conversion { strategy: "None".into(), webhook: None });
    let service = conversion.webhook.as_mut().and_then(|w| w.client_config.as_mut()).and_then(|c| c.service.as_mut());
    if let Some(service) = service {
        service.port.get_or_insert(443);
    }
}

/// Loads CRDs from each path: a file, a directory (recursively, `*.yaml`, `*.yml`, `*.json`), or
/// `-` for standard input. A file named explicitly must hold at least one CRD.
pub fn load_paths<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<Crd>, LoadError> {
    let mut crds = Vec::new();
    for_each_input(paths, |name, bytes, named_explicitly| {
        let loaded = load_bytes(name, bytes);
        let loaded = if named_explicitly { require_crd(name, loaded)? } else { loaded? };
        if loaded.is_empty() {
            tracing::debug!("{name}: skipped: no CustomResourceDefinition in it");
        }
        crds.extend(loaded);
        Ok(())
    })?;
    Ok(crds)
}

/// Loads every object (any kind) from the same kinds of paths; a `kind: List` contributes its
/// items. Used for custom resources, e.g. objects to send to a conversion webhook.
pub fn load_objects<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<Value>, LoadError> {
    Ok(load_located_objects(paths)?.into_iter().map(|located| located.value).collect())
}

/// An object read from an input, and where it starts there.
#[derive(Debug, Clone)]
pub struct LocatedObject {
    /// The object.
    pub value: Value,
    /// The input's name (a path, or `<stdin>`).
    pub file: Arc<str>,
    /// Where the object starts in it (its `kind: List`'s item).
    pub position: Option<Position>,
}

/// [`load_objects`], each with its file and position (`kubectl get -o yaml` output works as is:
/// a list's items are located one by one).
pub fn load_located_objects<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<LocatedObject>, LoadError> {
    let mut objects = Vec::new();
    for_each_input(paths, |name, bytes, _| {
        let file: Arc<str> = Arc::from(name);
        for document in parse(name, bytes)? {
            match document.value {
                Value::Object(mut list) if list.get("kind").and_then(Value::as_str) == Some("List") => {
                    if let Some(Value::Array(items)) = list.remove("items") {
                        objects.extend(items.into_iter().enumerate().map(|(index, value)| LocatedObject {
                            value,
                            file: Arc::clone(&file),
                            position: document.positions.get(&format!("/items/{index}")),
                        }));
                    }
                }
                value => {
                    objects.push(LocatedObject { value, file: Arc::clone(&file), position: document.positions.get("") })
                }
            }
        }
        Ok(())
    })?;
    Ok(objects)
}

/// Reads each input within the limits and hands over its bytes, with whether it was named
/// explicitly (as opposed to found in a directory).
fn for_each_input<P: AsRef<Path>>(
    paths: &[P],
    mut each: impl FnMut(&str, &[u8], bool) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    for path in paths {
        let path = path.as_ref();
        if path == Path::new("-") {
            let bytes = read_bounded(std::io::stdin().lock(), STDIN_NAME)?;
            each(STDIN_NAME, &require_content(STDIN_NAME, bytes)?, true)?;
        } else if path.is_dir() {
            for file in manifest_files(path)? {
                let name = file.display().to_string();
                let bytes = read_file(&file)?;
                // Kustomize and Helm output folders hold empty files; only a file named
                // explicitly must have something in it.
                if is_blank(&bytes) {
                    tracing::debug!("{name}: skipped: the file is empty");
                    continue;
                }
                each(&name, &bytes, false)?;
            }
        } else {
            let name = path.display().to_string();
            each(&name, &require_content(&name, read_file(path)?)?, true)?;
        }
    }
    Ok(())
}

fn read_file(path: &Path) -> Result<Vec<u8>, LoadError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| LoadError::Io { path: name.clone(), source })?;
    // A file known to be too large is refused before a byte of it is read.
    if file.metadata().is_ok_and(|m| m.is_file() && m.len() > MAX_INPUT_BYTES) {
        return Err(LoadError::TooLarge { path: name, limit_mib: MAX_INPUT_BYTES >> 20 });
    }
    read_bounded(file, &name)
}

/// Loads every CRD in one file; the result may be empty.
pub fn load_file(path: &Path) -> Result<Vec<Crd>, LoadError> {
    load_bytes(&path.display().to_string(), &read_file(path)?)
}

/// Loads every CRD in `bytes`, which came from the file called `name`.
pub fn load_bytes(name: &str, bytes: &[u8]) -> Result<Vec<Crd>, LoadError> {
    load_str(name, decode_text(name, bytes)?)
}

/// Loads every CRD in `text`, which came from the file called `name`.
pub fn load_str(name: &str, text: &str) -> Result<Vec<Crd>, LoadError> {
    let documents = parse_text(name, text)?;
    let (file, text): (Arc<str>, Arc<str>) = (Arc::from(name), Arc::from(text));
    documents
        .into_iter()
        .filter(is_crd_document)
        .map(|document| Crd::from_document(file.clone(), text.clone(), document))
        .collect()
}

/// Checks the encoding and parses the YAML stream.
fn parse(name: &str, bytes: &[u8]) -> Result<Vec<yaml::Document>, LoadError> {
    parse_text(name, decode_text(name, bytes)?)
}

/// The text of `bytes` (a UTF-8 byte order mark dropped), or where it stops being UTF-8.
fn decode_text<'a>(name: &str, bytes: &'a [u8]) -> Result<&'a str, LoadError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|err| {
        let offset = err.valid_up_to();
        LoadError::InvalidUtf8 {
            path: name.to_string(),
            position: position_at(bytes.get(..offset).unwrap_or(bytes)),
            offset,
        }
    })
}

/// Reads a file that is not a manifest (e.g. a configuration) through the same gate: at most
/// [`MAX_INPUT_BYTES`], valid UTF-8.
pub fn read_text(path: &Path) -> Result<String, LoadError> {
    let name = path.display().to_string();
    let bytes = read_file(path)?;
    decode_text(&name, &bytes).map(str::to_string)
}

/// Loads every CRD from a reader (e.g. another program's output) through the same gate; the
/// reader is not read past the limit.
pub fn load_reader(name: &str, reader: impl Read) -> Result<Vec<Crd>, LoadError> {
    load_bytes(name, &read_bounded(reader, name)?)
}

fn parse_text(name: &str, text: &str) -> Result<Vec<yaml::Document>, LoadError> {
    yaml::parse_documents(text).map_err(|err| LoadError::Syntax {
        path: name.to_string(),
        position: err.position,
        message: err.message,
    })
}

fn is_crd_document(document: &yaml::Document) -> bool {
    let api_version = document.value.get("apiVersion").and_then(Value::as_str);
    let kind = document.value.get("kind").and_then(Value::as_str);
    kind == Some(KIND) && matches!(api_version, Some(API_VERSION_V1 | API_VERSION_V1BETA1))
}

fn require_crd(name: &str, loaded: Result<Vec<Crd>, LoadError>) -> Result<Vec<Crd>, LoadError> {
    let crds = loaded?;
    if crds.is_empty() {
        return Err(LoadError::NoCrd {
            path: name.to_string(),
            position: Position { line: 1, column: 1 },
            empty: false,
        });
    }
    Ok(crds)
}

fn read_bounded(reader: impl Read, name: &str) -> Result<Vec<u8>, LoadError> {
    // Read in fixed chunks and join once: a growing buffer would double its way to twice the
    // limit (and keep every smaller copy resident) before an oversized input is refused.
    const CHUNK: u64 = 1 << 20;
    let mut reader = reader.take(MAX_INPUT_BYTES + 1);
    let (mut chunks, mut total) = (Vec::new(), 0usize);
    loop {
        let mut chunk = Vec::with_capacity(CHUNK as usize);
        let read = (&mut reader)
            .take(CHUNK)
            .read_to_end(&mut chunk)
            .map_err(|source| LoadError::Io { path: name.to_string(), source })?;
        if read == 0 {
            break;
        }
        total += read;
        chunks.push(chunk);
    }
    if total as u64 > MAX_INPUT_BYTES {
        return Err(LoadError::TooLarge { path: name.to_string(), limit_mib: MAX_INPUT_BYTES >> 20 });
    }
    Ok(chunks.concat())
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// An input named explicitly must not be empty.
fn require_content(name: &str, bytes: Vec<u8>) -> Result<Vec<u8>, LoadError> {
    if is_blank(&bytes) {
        return Err(LoadError::NoCrd {
            path: name.to_string(),
            position: Position { line: 1, column: 1 },
            empty: true,
        });
    }
    Ok(bytes)
}

/// Manifest files under `dir`, sorted so output is stable.
fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let io_err = |source| LoadError::Io { path: dir.display().to_string(), source };
        for entry in std::fs::read_dir(&dir).map_err(io_err)? {
            let path = entry.map_err(io_err)?.path();
            // Symbolic links to directories are not followed, so a link cycle cannot loop.
            if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                pending.push(path);
            } else if path.is_file() && is_manifest_name(&path) {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn is_manifest_name(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

fn position_at(prefix: &[u8]) -> Position {
    let line = prefix.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = prefix.iter().rposition(|&b| b == b'\n').map_or(0, |idx| idx + 1);
    // The prefix is valid UTF-8, so counting characters is safe.
    let column = String::from_utf8_lossy(prefix.get(line_start..).unwrap_or_default()).chars().count() + 1;
    Position { line: line as u32, column: column as u32 }
}

/// Turns a serde path into the API's field path and a JSON pointer.
fn field_and_pointer(path: &serde_path_to_error::Path) -> (String, String) {
    let mut field = String::new();
    let mut pointer = String::new();
    for segment in path.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => {
                field.push_str(&format!("[{index}]"));
                pointer.push_str(&format!("/{index}"));
            }
            serde_path_to_error::Segment::Map { key } => {
                if !field.is_empty() {
                    field.push('.');
                }
                field.push_str(key);
                pointer.push('/');
                pointer.push_str(&crate::field::escape_pointer_segment(key));
            }
            serde_path_to_error::Segment::Enum { .. } | serde_path_to_error::Segment::Unknown => {}
        }
    }
    (field, pointer)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1BETA1: &str = "\
apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata:
  name: crontabs.example.com
spec:
  group: example.com
  version: v1
  names:
    plural: crontabs
    kind: CronTab
  validation:
    openAPIV3Schema:
      type: object
      properties:
        host:
          type: string
";

    #[test]
    fn v1beta1_positions_follow_relocated_schemas() {
        let crds = load_str("crd.yaml", V1BETA1).unwrap();
        let crd = &crds[0];
        assert_eq!(crd.source_api_version, SourceApiVersion::V1beta1);
        assert_eq!(crd.definition.spec.versions[0].name, "v1");
        assert_eq!(crd.definition.spec.names.singular, "crontab");
        assert_eq!(crd.definition.spec.names.list_kind, "CronTabList");
        assert_eq!(
            crd.position("/spec/versions/0/schema/openAPIV3Schema/properties/host"),
            Some(Position { line: 15, column: 9 })
        );
    }

    #[test]
    fn non_crd_documents_are_skipped() {
        let text = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n---\n{V1BETA1}");
        let crds = load_str("all.yaml", &text).unwrap();
        assert_eq!(crds.len(), 1);
        assert_eq!(crds[0].origin.document, 1);
    }

    #[test]
    fn wrong_field_types_name_the_field_and_line() {
        let text =
            V1BETA1.replace("  version: v1\n", "  version: v1\n  versions:\n  - name: v1\n    served: yes-please\n");
        let err = load_str("bad.yaml", &text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "bad.yaml:10:5: spec.versions[0].served: invalid type: string \"yes-please\", expected a boolean"
        );
    }

    #[test]
    fn invalid_utf8_is_located() {
        let err = load_bytes("bin.yaml", b"a: 1\nb: \xff\n").unwrap_err();
        assert_eq!(err.to_string(), "bin.yaml:2:4: invalid UTF-8 (byte offset 8)");
    }

    #[test]
    fn an_empty_file_has_no_crd() {
        let err = require_content("e.yaml", b"  \n".to_vec()).unwrap_err();
        assert_eq!(err.to_string(), "e.yaml:1:1: no CustomResourceDefinition found (the file is empty)");
    }
}
