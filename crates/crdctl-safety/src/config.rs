//! Configuration, in crdify's file format so that teams can reuse theirs.
//!
//! ```yaml
//! validations:
//!   - name: enum
//!     enforcement: Error            # Error | Warn | None
//!     configuration: {additionPolicy: Allow}
//! unhandledEnforcement: Error       # Error | Warn | None
//! conversion: Ignore                # None | Ignore: skip served-version checks for Webhook CRDs
//! ```
//!
//! [`Config::default`] is what OLM v1 runs: descriptions not reported, enum additions allowed,
//! served-version checks skipped when the new CRD converts with a webhook. A file is read on top of
//! crdify's own defaults (everything Error, additions disallowed, conversion None), as crdify does.

use std::collections::HashMap;

use serde::Deserialize;

/// Every validation crdify registers, by the name used in configuration and in its messages.
pub const VALIDATIONS: [&str; 19] = [
    "existingFieldRemoval",
    "scope",
    "storedVersionRemoval",
    "default",
    "enum",
    "maximum",
    "maxItems",
    "maxLength",
    "maxProperties",
    "minimum",
    "minItems",
    "minLength",
    "minProperties",
    "required",
    "type",
    "description",
    "pattern",
    "nullable",
    "oneOf",
];

/// What happens when a check finds something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Enforcement {
    /// Report it and fail.
    Error,
    /// Report it without failing.
    Warn,
    /// Do not report it; the keyword still counts as understood, so it is never "unknown".
    None,
}

/// Whether additions or removals of enum values, oneOf schemas, nullable or patterns are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum Policy {
    /// Allowed.
    Allow,
    /// Reported.
    #[default]
    Disallow,
}

/// Whether served-version checks run for CRDs that convert with a webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum ConversionPolicy {
    /// Always compare served versions.
    #[default]
    None,
    /// Skip when the new CRD's strategy is `Webhook`: the webhook may reconcile the differences.
    Ignore,
}

/// Which checks run and how strictly.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    enforcement: HashMap<&'static str, Enforcement>,
    /// Enum values may be added.
    pub enum_addition: Policy,
    /// A field may become nullable.
    pub nullable_addition: Policy,
    /// A field may stop being nullable.
    pub nullable_removal: Policy,
    /// A pattern may be removed.
    pub pattern_removal: Policy,
    /// oneOf alternatives may be added.
    pub one_of_addition: Policy,
    /// oneOf alternatives may be removed.
    pub one_of_removal: Policy,
    /// What happens to changes no check understands.
    pub unhandled: Enforcement,
    /// Served-version checks and webhooks.
    pub conversion: ConversionPolicy,
}

impl Default for Config {
    /// OLM v1's configuration.
    fn default() -> Self {
        let mut config = Config::crdify();
        config.enforcement.insert("description", Enforcement::None);
        config.enum_addition = Policy::Allow;
        config.conversion = ConversionPolicy::Ignore;
        config
    }
}

/// A configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file is not valid YAML or does not have the expected shape.
    #[error("parsing config: {0}")]
    Parse(String),
    /// `validations[i]` has no name.
    #[error("validations[{0}] is invalid: name is required")]
    MissingName(usize),
    /// A validation name crdify does not have.
    #[error("configuring validation {0:?}: unknown validation : {0:?}")]
    UnknownValidation(String),
    /// A policy value other than Allow or Disallow.
    #[error(
        "configuring validation {validation:?}: validating {validation} config: unknown {which} policy : {value:?}"
    )]
    UnknownPolicy {
        /// The validation.
        validation: String,
        /// `addition` or `removal`.
        which: &'static str,
        /// What the file said.
        value: String,
    },
}

impl Config {
    /// crdify's defaults: every validation Error, additions disallowed, conversion None.
    pub fn crdify() -> Config {
        Config {
            enforcement: VALIDATIONS.iter().map(|&name| (name, Enforcement::Error)).collect(),
            enum_addition: Policy::Disallow,
            nullable_addition: Policy::Disallow,
            nullable_removal: Policy::Disallow,
            pattern_removal: Policy::Disallow,
            one_of_addition: Policy::Disallow,
            one_of_removal: Policy::Disallow,
            unhandled: Enforcement::Error,
            conversion: ConversionPolicy::None,
        }
    }

    /// Reads a crdify configuration file. Unknown keys are ignored, as crdify does.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        // The loader's parser and budget (depth, aliases, duplicate keys), as for manifests.
        let documents = crdctl_model::yaml::parse_documents(text).map_err(|err| {
            ConfigError::Parse(match err.position {
                Some(position) => format!("{position}: {}", err.message),
                None => err.message,
            })
        })?;
        let file: ConfigFile = match documents.into_iter().next() {
            Some(document) => {
                serde_json::from_value(document.value).map_err(|err| ConfigError::Parse(err.to_string()))?
            }
            None => ConfigFile::default(),
        };
        let mut config = Config::crdify();
        for (idx, validation) in file.validations.into_iter().enumerate() {
            let name = validation.name.filter(|n| !n.is_empty()).ok_or(ConfigError::MissingName(idx))?;
            let known =
                VALIDATIONS.iter().find(|&&v| v == name).ok_or_else(|| ConfigError::UnknownValidation(name.clone()))?;
            config.enforcement.insert(known, validation.enforcement.unwrap_or(Enforcement::Error));
            let policy = |which: &'static str, value: Option<String>| -> Result<Option<Policy>, ConfigError> {
                match value.as_deref() {
                    None | Some("") => Ok(None),
                    Some("Allow") => Ok(Some(Policy::Allow)),
                    Some("Disallow") => Ok(Some(Policy::Disallow)),
                    Some(other) => {
                        Err(ConfigError::UnknownPolicy { validation: name.clone(), which, value: other.to_string() })
                    }
                }
            };
            let settings = validation.configuration.unwrap_or_default();
            let addition = policy("addition", settings.addition_policy)?;
            let removal = policy("removal", settings.removal_policy)?;
            match *known {
                "enum" => config.enum_addition = addition.unwrap_or_default(),
                "nullable" => {
                    config.nullable_addition = addition.unwrap_or_default();
                    config.nullable_removal = removal.unwrap_or_default();
                }
                "pattern" => config.pattern_removal = removal.unwrap_or_default(),
                "oneOf" => {
                    config.one_of_addition = addition.unwrap_or_default();
                    config.one_of_removal = removal.unwrap_or_default();
                }
                _ => {}
            }
        }
        config.unhandled = file.unhandled_enforcement.unwrap_or(Enforcement::Error);
        config.conversion = file.conversion.unwrap_or_default();
        Ok(config)
    }

    /// The enforcement of a check (by its crdify name, or `unhandled`).
    pub fn enforcement(&self, check: &str) -> Enforcement {
        if check == "unhandled" {
            return self.unhandled;
        }
        self.enforcement.get(check).copied().unwrap_or(Enforcement::Error)
    }

    /// Sets the enforcement of a check.
    pub fn set_enforcement(&mut self, check: &'static str, enforcement: Enforcement) {
        self.enforcement.insert(check, enforcement);
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigFile {
    #[serde(default)]
    validations: Vec<ValidationEntry>,
    unhandled_enforcement: Option<Enforcement>,
    conversion: Option<ConversionPolicy>,
}

#[derive(Debug, Deserialize)]
struct ValidationEntry {
    name: Option<String>,
    enforcement: Option<Enforcement>,
    configuration: Option<PolicySettings>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicySettings {
    addition_policy: Option<String>,
    removal_policy: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_olm() {
        let config = Config::default();
        assert_eq!(config.enforcement("description"), Enforcement::None);
        assert_eq!(config.enforcement("type"), Enforcement::Error);
        assert_eq!(config.enum_addition, Policy::Allow);
        assert_eq!(config.conversion, ConversionPolicy::Ignore);
        assert_eq!(config.unhandled, Enforcement::Error);
    }

    #[test]
    fn olm_configuration_file_reproduces_the_default() {
        let text = "conversion: Ignore\nunhandledEnforcement: Error\nvalidations:\n  - name: description\n    enforcement: None\n  - name: enum\n    enforcement: Error\n    configuration:\n      additionPolicy: Allow\n";
        assert_eq!(Config::from_yaml(text).unwrap(), Config::default());
    }

    #[test]
    fn an_empty_file_is_crdify() {
        assert_eq!(Config::from_yaml("").unwrap(), Config::crdify());
        assert_eq!(Config::from_yaml("# nothing set\n").unwrap(), Config::crdify());
    }

    #[test]
    fn policies_and_enforcement() {
        let text = "validations:\n- name: nullable\n  enforcement: Warn\n  configuration: {additionPolicy: Allow, removalPolicy: Disallow}\n- name: pattern\n  configuration: {removalPolicy: Allow}\nunhandledEnforcement: Warn\nsomethingElse: ignored\n";
        let config = Config::from_yaml(text).unwrap();
        assert_eq!(config.enforcement("nullable"), Enforcement::Warn);
        assert_eq!(config.nullable_addition, Policy::Allow);
        assert_eq!(config.nullable_removal, Policy::Disallow);
        assert_eq!(config.pattern_removal, Policy::Allow);
        assert_eq!(config.enforcement("unhandled"), Enforcement::Warn);
    }

    #[test]
    fn errors_use_crdify_messages() {
        let err = |text: &str| Config::from_yaml(text).unwrap_err().to_string();
        assert_eq!(
            err("validations:\n- name: format\n"),
            r#"configuring validation "format": unknown validation : "format""#
        );
        assert_eq!(err("validations:\n- enforcement: Error\n"), "validations[0] is invalid: name is required");
        assert_eq!(
            err("validations:\n- name: enum\n  configuration: {additionPolicy: invalid}\n"),
            r#"configuring validation "enum": validating enum config: unknown addition policy : "invalid""#
        );
        assert!(err("validations:\n- name: enum\n  enforcement: Loud\n").starts_with("parsing config: "));
    }
}
