//! The CustomResourceDefinition model: the layer everything else in crdctl builds on.
//!
//! - [`load`] reads YAML or JSON (files, directories, stdin) into [`Crd`] values, keeping the
//!   whole document as JSON and a line and column for every node ([`yaml`]).
//! - [`crd`] is the typed v1 definition; [`normalize`] turns legacy
//!   `apiextensions.k8s.io/v1beta1` CRDs into v1, as the API server does.
//! - [`version`] orders version names by Kubernetes priority.
//! - [`field`] is how every check in crdctl reports a problem: field paths and field errors as
//!   apimachinery's `field` package writes them; [`names`] holds the name rules (DNS labels and
//!   subdomains, qualified names, label values), [`meta`] those of labels and annotations,
//!   [`webhook`] those of webhook URLs, and
//!   [`go`] prints values as Go prints them.
//! - [`json`] reads objects as text, field by field, without building values.
//!
//! What the schemas inside a definition mean (CEL, pruning, defaulting, validation of objects and
//! of definitions) is the `crdctl-schema` crate, one layer up. This crate does no networking and
//! no async, and reads files only in [`load`].
//!
//! ```
//! let crds = crdctl_model::load::load_str("crontab.yaml", r#"
//! apiVersion: apiextensions.k8s.io/v1
//! kind: CustomResourceDefinition
//! metadata: {name: crontabs.example.com}
//! spec:
//!   group: example.com
//!   scope: Namespaced
//!   names: {plural: crontabs, kind: CronTab}
//!   versions:
//!   - {name: v1beta1, served: true, storage: false, schema: {openAPIV3Schema: {type: object}}}
//!   - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
//! "#).unwrap();
//! let crd = &crds[0];
//! assert_eq!(crd.definition.preferred_version().unwrap().name, "v1");
//! assert_eq!(crd.position("/spec/versions/1/name").unwrap().line, 11);
//! ```

pub mod crd;
pub mod field;
pub mod go;
pub mod json;
pub mod load;
pub mod meta;
pub mod names;
pub mod normalize;
pub mod version;
pub mod webhook;
pub mod yaml;

pub use load::{Crd, LoadError, Origin, SourceApiVersion};
