//! A webhook's converted objects, read for what the API server keeps of them.
//!
//! The API server keeps every field of a converted object except `metadata`, of which it keeps
//! only labels and annotations: the rest is put back from the original (`restoreObjectMeta`).
//! So the client keeps every field as the JSON text the webhook wrote, borrowed from the answer
//! and never parsed into values. Metadata that is byte for byte what was sent needs no reading
//! at all; other metadata is read for what the checks look at — name, namespace and uid — and
//! for labels and annotations, skipping the rest of it unparsed. On a list through a webhook this is most of the metadata of every object
//! (resourceVersion, timestamps, managedFields). Labels and annotations the webhook left as they
//! were are kept from the original, so the common case allocates nothing for metadata at all,
//! and the converted object is written out as text ([`crate::ObjectJson`]) with the original's
//! metadata spliced in.

use std::borrow::Cow;
use std::fmt;

use crdctl_model::json::{Fields, Key};
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON value read as `T` when it is an object; of any other value only its type is kept, for
/// the error that names it.
#[derive(Debug)]
pub enum ObjectOr<T> {
    /// The value was an object.
    Object(T),
    /// The value was not an object.
    Other(JsonType),
}

/// The type of a JSON value, as Go's decoders and `fmt` name it in the API server's errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A number without fraction or exponent.
    Int,
    /// Any other number.
    Float,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl JsonType {
    /// The type of `value`.
    pub fn of(value: &Value) -> JsonType {
        match value {
            Value::Null => JsonType::Null,
            Value::Bool(_) => JsonType::Bool,
            Value::Number(n) if n.is_f64() => JsonType::Float,
            Value::Number(_) => JsonType::Int,
            Value::String(_) => JsonType::String,
            Value::Array(_) => JsonType::Array,
            Value::Object(_) => JsonType::Object,
        }
    }

    /// Go's `%T` of the decoded value (`int64`, `[]interface {}`), as `fmt` prints it in
    /// apimachinery's messages. Not [`JsonType::json_name`]: Go words the two differently.
    pub fn go_type(self) -> &'static str {
        match self {
            JsonType::Null => "<nil>",
            JsonType::Bool => "bool",
            JsonType::Float => "float64",
            JsonType::Int => "int64",
            JsonType::String => "string",
            JsonType::Array => "[]interface {}",
            JsonType::Object => "map[string]interface {}",
        }
    }

    /// The JSON kind (`number`, `array`) as `encoding/json` names it in decoding errors
    /// (`json: cannot unmarshal number into Go value of type string`).
    pub fn json_name(self) -> &'static str {
        match self {
            JsonType::Null => "null",
            JsonType::Bool => "bool",
            JsonType::Int | JsonType::Float => "number",
            JsonType::String => "string",
            JsonType::Array => "array",
            JsonType::Object => "object",
        }
    }
}

/// One entry of `convertedObjects`, borrowing from the answer.
pub type Converted<'a> = ObjectOr<ConvertedObject<'a>>;

/// A converted object: its fields as the webhook wrote them, and its `metadata`, read apart.
#[derive(Debug)]
pub struct ConvertedObject<'a> {
    /// Every field but `metadata`, in the webhook's order, as JSON text.
    pub fields: Fields<'a>,
    /// How many of `fields` came before `metadata`.
    pub metadata_at: usize,
    /// The webhook's metadata as it wrote it, when it sent one ([`ConvertedMetadata::read`]).
    pub metadata: Option<&'a RawValue>,
}

impl<'a> ConvertedObject<'a> {
    /// The field `key` as a string, or `""` when it is absent or not a string.
    pub fn text(&self, key: &str) -> Cow<'a, str> {
        match self.fields.get(key).map(|raw| serde_json::from_str::<Text<'a>>(raw.get())) {
            Some(Ok(Text::Str(text))) => text,
            _ => Cow::Borrowed(""),
        }
    }
}

/// What the API server looks at in a converted object's metadata.
#[derive(Debug, Default)]
pub struct ConvertedMetadata<'a> {
    name: Option<Text<'a>>,
    namespace: Option<Text<'a>>,
    uid: Option<Text<'a>>,
    /// `metadata.labels`: its entries in the webhook's order, or another value.
    pub labels: Option<ObjectOr<Entries<'a>>>,
    /// `metadata.annotations`, likewise.
    pub annotations: Option<ObjectOr<Entries<'a>>>,
}

/// The entries of a labels or annotations map, in the webhook's order.
pub type Entries<'a> = Vec<(Cow<'a, str>, Text<'a>)>;

/// A JSON string, borrowed when it has no escapes, or the type of any other value.
#[derive(Debug)]
pub enum Text<'a> {
    /// A string.
    Str(Cow<'a, str>),
    /// Anything else.
    Other(JsonType),
}

impl<'a> ConvertedMetadata<'a> {
    /// Reads a converted object's metadata text.
    pub fn read(text: &'a RawValue) -> Result<ObjectOr<ConvertedMetadata<'a>>, serde_json::Error> {
        serde_json::from_str(text.get())
    }

    /// The identity field `key` (`name`, `namespace` or `uid`), or `""` when it is absent or
    /// not a string, as `unstructured.GetName` reads it.
    pub fn identity(&self, key: &str) -> &str {
        let field = match key {
            "name" => &self.name,
            "namespace" => &self.namespace,
            _ => &self.uid,
        };
        match field {
            Some(Text::Str(text)) => text,
            _ => "",
        }
    }
}

/// Reads the fields of a JSON object into `Self`.
pub trait FromMap<'de>: Sized {
    /// Reads every entry of `map`.
    fn from_map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

impl<'de> FromMap<'de> for ConvertedObject<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let (mut fields, mut metadata_at, mut metadata) = (Fields::default(), None, None);
        while let Some(Key(key)) = map.next_key()? {
            if key == "metadata" {
                metadata = Some(map.next_value()?);
                metadata_at.get_or_insert(fields.len());
            } else {
                fields.insert(key, map.next_value()?);
            }
        }
        let metadata_at = metadata_at.unwrap_or(fields.len());
        Ok(ConvertedObject { fields, metadata_at, metadata })
    }
}

impl<'de> FromMap<'de> for ConvertedMetadata<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut metadata = ConvertedMetadata::default();
        while let Some(Key(key)) = map.next_key()? {
            match key.as_ref() {
                "name" => metadata.name = Some(map.next_value()?),
                "namespace" => metadata.namespace = Some(map.next_value()?),
                "uid" => metadata.uid = Some(map.next_value()?),
                "labels" => metadata.labels = Some(map.next_value()?),
                "annotations" => metadata.annotations = Some(map.next_value()?),
                // Restored from the original: not read.
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(metadata)
    }
}

impl<'de> FromMap<'de> for Entries<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut entries = Vec::new();
        while let Some((Key(key), value)) = map.next_entry()? {
            entries.push((key, value));
        }
        Ok(entries)
    }
}

impl<'de, T: FromMap<'de>> Deserialize<'de> for ObjectOr<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectOrVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: FromMap<'de>> Visitor<'de> for ObjectOrVisitor<T> {
            type Value = ObjectOr<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectOr<T>, A::Error> {
                T::from_map(map).map(ObjectOr::Object)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ObjectOr<T>, A::Error> {
                IgnoredAny::deserialize(SeqAccessDeserializer::new(seq)).map(|_| ObjectOr::Other(JsonType::Array))
            }
            fn visit_unit<E>(self) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(JsonType::Null))
            }
            fn visit_bool<E>(self, _: bool) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(JsonType::Bool))
            }
            fn visit_i64<E>(self, _: i64) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(JsonType::Int))
            }
            fn visit_u64<E>(self, _: u64) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(JsonType::Int))
            }
            fn visit_f64<E>(self, _: f64) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(JsonType::Float))
            }
            fn visit_str<E>(self, _: &str) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(JsonType::String))
            }
        }
        deserializer.deserialize_any(ObjectOrVisitor(std::marker::PhantomData))
    }
}

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Text<'de>, E> {
                Ok(Text::Str(Cow::Borrowed(value)))
            }
            fn visit_str<E>(self, value: &str) -> Result<Text<'de>, E> {
                Ok(Text::Str(Cow::Owned(value.to_string())))
            }
            fn visit_string<E>(self, value: String) -> Result<Text<'de>, E> {
                Ok(Text::Str(Cow::Owned(value)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Text<'de>, A::Error> {
                IgnoredAny::deserialize(MapAccessDeserializer::new(map)).map(|_| Text::Other(JsonType::Object))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Text<'de>, A::Error> {
                IgnoredAny::deserialize(SeqAccessDeserializer::new(seq)).map(|_| Text::Other(JsonType::Array))
            }
            fn visit_unit<E>(self) -> Result<Text<'de>, E> {
                Ok(Text::Other(JsonType::Null))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Text<'de>, E> {
                Ok(Text::Other(JsonType::Bool))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Text<'de>, E> {
                Ok(Text::Other(JsonType::Int))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Text<'de>, E> {
                Ok(Text::Other(JsonType::Int))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Text<'de>, E> {
                Ok(Text::Other(JsonType::Float))
            }
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

/// `map[key]`. The top level of an object and its metadata have a handful of fields: comparing
/// them is cheaper than hashing the key.
pub(crate) fn field<'a>(map: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a Value> {
    if map.len() <= 16 { map.iter().find(|(name, _)| *name == key).map(|(_, value)| value) } else { map.get(key) }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn metadata_is_read_for_identity_labels_and_annotations_only() {
        let bytes = serde_json::to_vec(&json!({
            "apiVersion": "v1", "metadata": {"name": "a", "uid": 7, "labels": {"x": "1", "y": null}, "managedFields": [{}]}, "spec": {}
        }))
        .unwrap();
        let ObjectOr::Object(object) = serde_json::from_slice::<Converted>(&bytes).unwrap() else {
            panic!("an object")
        };
        let fields: Vec<(&str, &str)> = object.fields.iter().map(|(key, value)| (key, value.get())).collect();
        assert_eq!(fields, [("apiVersion", r#""v1""#), ("spec", "{}")]);
        assert_eq!(object.metadata_at, 1);
        let ObjectOr::Object(metadata) = ConvertedMetadata::read(object.metadata.unwrap()).unwrap() else {
            panic!("metadata")
        };
        assert_eq!(
            (metadata.identity("name"), metadata.identity("uid"), metadata.identity("namespace")),
            ("a", "", "")
        );
        let Some(ObjectOr::Object(labels)) = metadata.labels else { panic!("labels") };
        assert!(matches!(&labels[..], [(x, Text::Str(one)), (y, Text::Other(JsonType::Null))]
            if x == "x" && one == "1" && y == "y"));
        assert!(matches!((&labels[0].0, &labels[0].1), (Cow::Borrowed(_), Text::Str(Cow::Borrowed(_)))));
        assert!(metadata.annotations.is_none());
    }

    #[test]
    fn values_that_are_not_objects_are_kept() {
        for value in [json!(null), json!(true), json!(-1), json!(1), json!(1.5), json!("s"), json!([1, {"a": 2}])] {
            let bytes = serde_json::to_vec(&value).unwrap();
            let read: Converted = serde_json::from_slice(&bytes).unwrap();
            assert!(matches!(read, ObjectOr::Other(kept) if kept == JsonType::of(&value)), "{value}");
        }
        let read: Converted =
            serde_json::from_slice(br#"{"metadata": {"labels": [1], "name": {"a": "\u0062"}}}"#).unwrap();
        let ObjectOr::Object(ConvertedObject { metadata: Some(text), .. }) = read else { panic!("metadata") };
        let ObjectOr::Object(metadata) = ConvertedMetadata::read(text).unwrap() else { panic!("metadata") };
        assert!(matches!(metadata.labels, Some(ObjectOr::Other(JsonType::Array))));
        assert_eq!(metadata.identity("name"), "");
    }

    #[test]
    fn escaped_strings_are_read_owned() {
        let read: ObjectOr<ConvertedMetadata> = serde_json::from_slice(br#"{"name": "a\"b"}"#).unwrap();
        let ObjectOr::Object(metadata) = read else { panic!("metadata") };
        assert_eq!(metadata.identity("name"), "a\"b");
    }
}
