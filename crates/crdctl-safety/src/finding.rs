//! Findings: what changed, where, and how bad it is. Findings are data; [`crate::dialect`]
//! turns them into text.

use serde_json::Value;

use crate::schema::SchemaPath;

/// One unsafe (or, with a Warn enforcement, questionable) change.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// `metadata.name` of the CRD.
    pub crd: String,
    /// Which comparison found it.
    pub scope: Scope,
    /// The schema node, for schema findings.
    pub path: Option<SchemaPath>,
    /// What changed.
    pub change: Change,
    /// Error blocks the upgrade; Warning does not.
    pub severity: Severity,
    /// The finding follows from a field that disappeared: crdify reports these, the OLM
    /// docs' format folds them into the one removal finding.
    pub implied_by_removal: bool,
    /// Where to point a reader.
    pub location: Option<Location>,
}

/// Which comparison a finding comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// The CRD as a whole (scope, stored versions, removed fields).
    Crd,
    /// One version, old against new.
    Version(String),
    /// Two served versions of the new CRD, older (lower priority) first.
    ServedPair(String, String),
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Reported and not blocking.
    Warning,
    /// Blocks the upgrade.
    Error,
}

/// A place in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file as given.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

/// The min and max keyword families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// `maximum`.
    Maximum,
    /// `maxItems`.
    MaxItems,
    /// `maxLength`.
    MaxLength,
    /// `maxProperties`.
    MaxProperties,
    /// `minimum`.
    Minimum,
    /// `minItems`.
    MinItems,
    /// `minLength`.
    MinLength,
    /// `minProperties`.
    MinProperties,
}

impl Bound {
    /// Every bound keyword, in registry order.
    pub const ALL: [Bound; 8] = [
        Bound::Maximum,
        Bound::MaxItems,
        Bound::MaxLength,
        Bound::MaxProperties,
        Bound::Minimum,
        Bound::MinItems,
        Bound::MinLength,
        Bound::MinProperties,
    ];

    /// The schema keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            Bound::Maximum => "maximum",
            Bound::MaxItems => "maxItems",
            Bound::MaxLength => "maxLength",
            Bound::MaxProperties => "maxProperties",
            Bound::Minimum => "minimum",
            Bound::MinItems => "minItems",
            Bound::MinLength => "minLength",
            Bound::MinProperties => "minProperties",
        }
    }

    /// Whether a larger value is stricter (the min family).
    pub fn is_lower_bound(self) -> bool {
        matches!(self, Bound::Minimum | Bound::MinItems | Bound::MinLength | Bound::MinProperties)
    }

    /// Whether the value is a float (`maximum`, `minimum`) rather than an integer.
    pub fn is_float(self) -> bool {
        matches!(self, Bound::Maximum | Bound::Minimum)
    }
}

/// What changed. Values are the JSON from the CRDs.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// `spec.scope` changed.
    ScopeChanged {
        /// Old scope.
        old: String,
        /// New scope.
        new: String,
    },
    /// A version in the old CRD's `status.storedVersions` is gone from `spec.versions`.
    StoredVersionRemoved {
        /// The version.
        version: String,
    },
    /// A schema node of an existing version is gone.
    FieldRemoved,
    /// An enum appeared where any value was allowed.
    EnumRestricted {
        /// The new enum.
        values: Vec<Value>,
    },
    /// Enum values were removed.
    EnumValuesRemoved {
        /// The removed values.
        values: Vec<Value>,
    },
    /// Enum values were added (only reported when the configuration disallows it).
    EnumValuesAdded {
        /// The added values.
        values: Vec<Value>,
    },
    /// A default appeared.
    DefaultAdded {
        /// The new default.
        value: Value,
    },
    /// A default disappeared.
    DefaultRemoved {
        /// The old default.
        value: Value,
    },
    /// A default changed.
    DefaultChanged {
        /// The old default.
        old: Value,
        /// The new default.
        new: Value,
    },
    /// A min or max bound appeared.
    BoundAdded {
        /// Which keyword.
        bound: Bound,
        /// The new bound.
        value: Value,
    },
    /// A bound became stricter: a max decreased or a min increased.
    BoundTightened {
        /// Which keyword.
        bound: Bound,
        /// The old bound.
        old: Value,
        /// The new bound.
        new: Value,
    },
    /// Fields became required.
    RequiredAdded {
        /// The newly required fields, sorted.
        fields: Vec<String>,
    },
    /// `type` changed.
    TypeChanged {
        /// Old type (`""` when unset).
        old: String,
        /// New type.
        new: String,
    },
    /// `description` changed (reported only when configured).
    DescriptionChanged {
        /// Old description.
        old: String,
        /// New description.
        new: String,
    },
    /// A pattern appeared.
    PatternAdded {
        /// The new pattern.
        new: String,
    },
    /// A pattern disappeared.
    PatternRemoved {
        /// The old pattern.
        old: String,
    },
    /// A pattern changed.
    PatternChanged {
        /// The old pattern.
        old: String,
        /// The new pattern.
        new: String,
    },
    /// `nullable` changed (`true` when it became nullable).
    NullableChanged {
        /// The new value.
        now_nullable: bool,
    },
    /// A oneOf appeared where there was none.
    OneOfAdded {
        /// The new subschemas, as compact JSON, sorted.
        schemas: Vec<String>,
        /// Additions are allowed, but the old schema is not one of the alternatives, so objects
        /// that were valid may now match none.
        old_schema_lost: bool,
    },
    /// oneOf alternatives were removed.
    OneOfSchemasRemoved {
        /// The removed subschemas, as compact JSON, sorted.
        schemas: Vec<String>,
    },
    /// oneOf alternatives were added.
    OneOfSchemasAdded {
        /// The added subschemas, as compact JSON, sorted.
        schemas: Vec<String>,
    },
    /// Keywords changed that no check knows to be safe.
    Unknown {
        /// Each changed keyword.
        keywords: Vec<KeywordChange>,
    },
    /// What the API server itself refuses on update, preflight or not (`--enforcement None`
    /// leaves only these): an immutable field changed, a stored version removed.
    ApiServerRefusal {
        /// The field path, e.g. `spec.scope`.
        field: String,
        /// The API server's message after the field, e.g. `Invalid value: "Cluster": field is
        /// immutable` (texts from `crdctl_schema::definition`).
        message: String,
    },
}

/// One keyword's old and new value (`None` when unset).
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordChange {
    /// The schema keyword, e.g. `format`.
    pub keyword: String,
    /// The old value.
    pub old: Option<Value>,
    /// The new value.
    pub new: Option<Value>,
}

impl Change {
    /// The crdify validation that reports this change; also the name used in configuration.
    pub fn check(&self) -> &'static str {
        match self {
            Change::ScopeChanged { .. } => "scope",
            Change::StoredVersionRemoved { .. } => "storedVersionRemoval",
            Change::FieldRemoved => "existingFieldRemoval",
            Change::EnumRestricted { .. } | Change::EnumValuesRemoved { .. } | Change::EnumValuesAdded { .. } => "enum",
            Change::DefaultAdded { .. } | Change::DefaultRemoved { .. } | Change::DefaultChanged { .. } => "default",
            Change::BoundAdded { bound, .. } | Change::BoundTightened { bound, .. } => bound.keyword(),
            Change::RequiredAdded { .. } => "required",
            Change::TypeChanged { .. } => "type",
            Change::DescriptionChanged { .. } => "description",
            Change::PatternAdded { .. } | Change::PatternRemoved { .. } | Change::PatternChanged { .. } => "pattern",
            Change::NullableChanged { .. } => "nullable",
            Change::OneOfAdded { .. } | Change::OneOfSchemasRemoved { .. } | Change::OneOfSchemasAdded { .. } => {
                "oneOf"
            }
            Change::Unknown { .. } => "unhandled",
            Change::ApiServerRefusal { .. } => "apiServer",
        }
    }

    /// Whether stored objects can show this change: data the new schema refuses or drops.
    /// Defaults, descriptions and loosened constraints break no stored object; scope and
    /// stored-version changes affect every object alike.
    pub fn judged_by_data(&self) -> bool {
        matches!(
            self,
            Change::FieldRemoved
                | Change::EnumRestricted { .. }
                | Change::EnumValuesRemoved { .. }
                | Change::BoundAdded { .. }
                | Change::BoundTightened { .. }
                | Change::RequiredAdded { .. }
                | Change::TypeChanged { .. }
                | Change::PatternAdded { .. }
                | Change::PatternChanged { .. }
                | Change::NullableChanged { now_nullable: false }
                | Change::OneOfAdded { .. }
                | Change::OneOfSchemasRemoved { .. }
                | Change::Unknown { .. }
        )
    }

    /// The OLM validation name the OLM docs print (`NoScopeChange`, `ChangeValidator`, ...).
    pub fn validation(&self, scope: &Scope) -> &'static str {
        match (self, scope) {
            (Change::ScopeChanged { .. }, _) => "NoScopeChange",
            (Change::StoredVersionRemoved { .. }, _) => "NoStoredVersionRemoved",
            (Change::ApiServerRefusal { .. }, _) => "APIServerValidation",
            (_, Scope::ServedPair(..)) => "ServedVersionValidator",
            (Change::FieldRemoved, _) => "NoExistingFieldRemoved",
            _ => "ChangeValidator",
        }
    }
}

/// The result of comparing an installed CRD with its replacement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Every finding, sorted: CRD-wide first, then per version, then served pairs; within each,
    /// by version order, then schema document order.
    pub findings: Vec<Finding>,
    /// Things the check could not decide, e.g. unknown stored versions.
    pub notes: Vec<Note>,
}

/// Something the check could not decide or wants a person to know; not a finding. The text
/// lives with the other texts, in [`crate::dialect::note`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A version left `spec.versions`, and without the installed CRD's `status.storedVersions`
    /// nobody can say whether objects are still stored in it.
    StoredVersionsUnknown {
        /// The CRD.
        crd: String,
        /// The removed version.
        version: String,
    },
    /// An installed CRD is not in the new set: applying the set as a whole deletes it.
    CrdDropped {
        /// The CRD.
        crd: String,
    },
}

impl Report {
    /// Whether the upgrade is safe: no error-level finding.
    pub fn is_safe(&self) -> bool {
        !self.findings.iter().any(|f| f.severity == Severity::Error)
    }

    /// Adds another CRD's report.
    pub fn extend(&mut self, other: Report) {
        self.findings.extend(other.findings);
        self.notes.extend(other.notes);
    }
}
