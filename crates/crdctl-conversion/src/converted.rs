//! A webhook's converted objects, read for what the API server keeps of them.
//!
//! The API server keeps every field of a converted object except `metadata`, of which it keeps
//! only labels and annotations: the rest is put back from the original (`restoreObjectMeta`).
//! So the client reads a converted object's `metadata` for what the checks look at — name,
//! namespace and uid — and for labels and annotations, and skips the rest of it unparsed. On a
//! list through a webhook this is most of the metadata of every object (resourceVersion,
//! timestamps, managedFields), and the original's is moved in instead of compared and copied.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A JSON value read as `T` when it is an object; any other value is kept as it is, for the
/// error that names its type.
#[derive(Debug)]
pub enum ObjectOr<T> {
    /// The value was an object.
    Object(T),
    /// The value was not an object.
    Other(Value),
}

/// One entry of `convertedObjects`.
pub type Converted = ObjectOr<ConvertedObject>;

/// A converted object: its fields as the webhook wrote them, with `null` holding the place of
/// `metadata`, which is read apart.
#[derive(Debug)]
pub struct ConvertedObject {
    /// Every field; `metadata`, when present, is a placeholder.
    pub fields: Map<String, Value>,
    /// The webhook's metadata, when it sent one.
    pub metadata: Option<ObjectOr<ConvertedMetadata>>,
}

/// What the API server looks at in a converted object's metadata. Identity fields that are not
/// strings read as absent, as `unstructured.GetName` reads them.
#[derive(Debug, Default)]
pub struct ConvertedMetadata {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `metadata.namespace`.
    pub namespace: Option<String>,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.labels`, any JSON value.
    pub labels: Option<Value>,
    /// `metadata.annotations`, any JSON value.
    pub annotations: Option<Value>,
}

impl ConvertedMetadata {
    /// The identity field `key` (`name`, `namespace` or `uid`), or `""`.
    pub fn identity(&self, key: &str) -> &str {
        let field = match key {
            "name" => &self.name,
            "namespace" => &self.namespace,
            _ => &self.uid,
        };
        field.as_deref().unwrap_or_default()
    }
}

/// Reads the fields of a JSON object into `Self`.
trait FromMap: Sized {
    fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

impl FromMap for ConvertedObject {
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let (mut fields, mut metadata) = (Map::new(), None);
        while let Some(key) = map.next_key::<String>()? {
            if key == "metadata" {
                metadata = Some(map.next_value()?);
                fields.insert(key, Value::Null);
            } else {
                let value = map.next_value()?;
                fields.insert(key, value);
            }
        }
        Ok(ConvertedObject { fields, metadata })
    }
}

impl FromMap for ConvertedMetadata {
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let text = |value: Value| match value {
            Value::String(text) => Some(text),
            _ => None,
        };
        let mut metadata = ConvertedMetadata::default();
        while let Some(key) = map.next_key::<MetadataKey>()? {
            match key {
                MetadataKey::Name => metadata.name = text(map.next_value()?),
                MetadataKey::Namespace => metadata.namespace = text(map.next_value()?),
                MetadataKey::Uid => metadata.uid = text(map.next_value()?),
                MetadataKey::Labels => metadata.labels = Some(map.next_value()?),
                MetadataKey::Annotations => metadata.annotations = Some(map.next_value()?),
                MetadataKey::Restored => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(metadata)
    }
}

/// A metadata key, read without allocating.
enum MetadataKey {
    Name,
    Namespace,
    Uid,
    Labels,
    Annotations,
    /// Anything else: restored from the original, so not read.
    Restored,
}

impl<'de> Deserialize<'de> for MetadataKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = MetadataKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a metadata field name")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<MetadataKey, E> {
                Ok(match key {
                    "name" => MetadataKey::Name,
                    "namespace" => MetadataKey::Namespace,
                    "uid" => MetadataKey::Uid,
                    "labels" => MetadataKey::Labels,
                    "annotations" => MetadataKey::Annotations,
                    _ => MetadataKey::Restored,
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'de, T: FromMap> Deserialize<'de> for ObjectOr<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectOrVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: FromMap> Visitor<'de> for ObjectOrVisitor<T> {
            type Value = ObjectOr<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectOr<T>, A::Error> {
                T::from_map(map).map(ObjectOr::Object)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ObjectOr<T>, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(ObjectOr::Other(Value::Array(items)))
            }
            fn visit_unit<E>(self) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(Value::Null))
            }
            fn visit_bool<E>(self, value: bool) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(Value::Bool(value)))
            }
            fn visit_i64<E>(self, value: i64) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(value.into()))
            }
            fn visit_u64<E>(self, value: u64) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(value.into()))
            }
            fn visit_f64<E>(self, value: f64) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(value.into()))
            }
            fn visit_str<E>(self, value: &str) -> Result<ObjectOr<T>, E> {
                Ok(ObjectOr::Other(value.into()))
            }
        }
        deserializer.deserialize_any(ObjectOrVisitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn metadata_is_read_for_identity_labels_and_annotations_only() {
        let object: Converted = serde_json::from_value(json!({
            "apiVersion": "v1", "metadata": {"name": "a", "uid": 7, "labels": {"x": "1"}, "managedFields": [{}]}, "spec": {}
        }))
        .unwrap();
        let ObjectOr::Object(object) = object else { panic!("an object") };
        assert_eq!(object.fields, *json!({"apiVersion": "v1", "metadata": null, "spec": {}}).as_object().unwrap());
        let Some(ObjectOr::Object(metadata)) = object.metadata else { panic!("metadata") };
        assert_eq!(
            (metadata.identity("name"), metadata.identity("uid"), metadata.identity("namespace")),
            ("a", "", "")
        );
        assert_eq!(metadata.labels, Some(json!({"x": "1"})));
        assert_eq!(metadata.annotations, None);
    }

    #[test]
    fn values_that_are_not_objects_are_kept() {
        for value in [json!(null), json!(true), json!(-1), json!(1), json!(1.5), json!("s"), json!([1, {"a": 2}])] {
            let read: Converted = serde_json::from_value(value.clone()).unwrap();
            assert!(matches!(read, ObjectOr::Other(ref kept) if *kept == value), "{value}");
        }
        let read: Converted = serde_json::from_value(json!({"metadata": [1]})).unwrap();
        assert!(matches!(read, ObjectOr::Object(ConvertedObject { metadata: Some(ObjectOr::Other(_)), .. })));
    }
}
