//! The CustomResourceDefinition model: the layer everything else in crdctl builds on.
//!
//! - [`load`] reads YAML or JSON (files, directories, stdin) into [`Crd`] values, keeping the
//!   whole document as JSON and a line and column for every node ([`yaml`]).
//! - [`normalize`] turns legacy `apiextensions.k8s.io/v1beta1` CRDs into v1, as the API server does.
//! - [`version`] orders version names by Kubernetes priority.
//! - [`validation`] checks a definition the way the API server does on create and update, with
//!   the API server's field paths and messages.
//!
//! This crate does no networking and no async; it reads files only in [`load`].
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
//! assert!(crdctl_model::validation::validate(crd).is_empty());
//! ```

pub mod crd;
pub mod json;
pub mod load;
pub mod normalize;
pub mod schema;
pub mod validation;
pub mod version;
pub mod yaml;

pub use load::{Crd, LoadError, Origin, SourceApiVersion};
