//! A webhook's converted objects, read for what the API server keeps of them.
//!
//! The API server keeps every field of a converted object except `metadata`, of which it keeps
//! only labels and annotations: the rest is put back from the original (`restoreObjectMeta`).
//! So the client reads a converted object's `metadata` for what the checks look at — name,
//! namespace and uid — and for labels and annotations, and skips the rest of it unparsed. On a
//! list through a webhook this is most of the metadata of every object (resourceVersion,
//! timestamps, managedFields). What it does read borrows from the answer's bytes: labels and
//! annotations the webhook left as they were are kept from the original, so the common case
//! allocates nothing for metadata at all.

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
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

/// One entry of `convertedObjects`, borrowing from the answer.
pub type Converted<'a> = ObjectOr<ConvertedObject<'a>>;

/// A converted object: its fields as the webhook wrote them, with `null` holding the place of
/// `metadata`, which is read apart.
#[derive(Debug)]
pub struct ConvertedObject<'a> {
    /// Every field; `metadata`, when present, is a placeholder.
    pub fields: Map<String, Value>,
    /// The webhook's metadata, when it sent one.
    pub metadata: Option<ObjectOr<ConvertedMetadata<'a>>>,
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

/// A JSON string, borrowed when it has no escapes, or any other value.
#[derive(Debug)]
pub enum Text<'a> {
    /// A string.
    Str(Cow<'a, str>),
    /// Anything else.
    Other(Value),
}

impl ConvertedMetadata<'_> {
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

impl<'de> FromMap<'de> for ConvertedMetadata<'de> {
    fn from_map<A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut metadata = ConvertedMetadata::default();
        while let Some(key) = map.next_key::<Text<'de>>()? {
            let Text::Str(key) = key else { continue };
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
        while let Some((key, value)) = map.next_entry::<Text<'de>, Text<'de>>()? {
            if let Text::Str(key) = key {
                entries.push((key, value));
            }
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
                Value::deserialize(SeqAccessDeserializer::new(seq)).map(ObjectOr::Other)
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
                Value::deserialize(MapAccessDeserializer::new(map)).map(Text::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Text<'de>, A::Error> {
                Value::deserialize(SeqAccessDeserializer::new(seq)).map(Text::Other)
            }
            fn visit_unit<E>(self) -> Result<Text<'de>, E> {
                Ok(Text::Other(Value::Null))
            }
            fn visit_bool<E>(self, value: bool) -> Result<Text<'de>, E> {
                Ok(Text::Other(Value::Bool(value)))
            }
            fn visit_i64<E>(self, value: i64) -> Result<Text<'de>, E> {
                Ok(Text::Other(value.into()))
            }
            fn visit_u64<E>(self, value: u64) -> Result<Text<'de>, E> {
                Ok(Text::Other(value.into()))
            }
            fn visit_f64<E>(self, value: f64) -> Result<Text<'de>, E> {
                Ok(Text::Other(value.into()))
            }
        }
        deserializer.deserialize_any(TextVisitor)
    }
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
        assert_eq!(object.fields, *json!({"apiVersion": "v1", "metadata": null, "spec": {}}).as_object().unwrap());
        let Some(ObjectOr::Object(metadata)) = object.metadata else { panic!("metadata") };
        assert_eq!(
            (metadata.identity("name"), metadata.identity("uid"), metadata.identity("namespace")),
            ("a", "", "")
        );
        let Some(ObjectOr::Object(labels)) = metadata.labels else { panic!("labels") };
        assert!(matches!(&labels[..], [(x, Text::Str(one)), (y, Text::Other(Value::Null))]
            if x == "x" && one == "1" && y == "y"));
        assert!(matches!((&labels[0].0, &labels[0].1), (Cow::Borrowed(_), Text::Str(Cow::Borrowed(_)))));
        assert!(metadata.annotations.is_none());
    }

    #[test]
    fn values_that_are_not_objects_are_kept() {
        for value in [json!(null), json!(true), json!(-1), json!(1), json!(1.5), json!("s"), json!([1, {"a": 2}])] {
            let bytes = serde_json::to_vec(&value).unwrap();
            let read: Converted = serde_json::from_slice(&bytes).unwrap();
            assert!(matches!(read, ObjectOr::Other(ref kept) if *kept == value), "{value}");
        }
        let read: Converted =
            serde_json::from_slice(br#"{"metadata": {"labels": [1], "name": {"a": "\u0062"}}}"#).unwrap();
        let ObjectOr::Object(ConvertedObject { metadata: Some(ObjectOr::Object(metadata)), .. }) = read else {
            panic!("metadata")
        };
        assert!(matches!(metadata.labels, Some(ObjectOr::Other(ref v)) if *v == json!([1])));
        assert_eq!(metadata.identity("name"), "");
    }

    #[test]
    fn escaped_strings_are_read_owned() {
        let read: ObjectOr<ConvertedMetadata> = serde_json::from_slice(br#"{"name": "a\"b"}"#).unwrap();
        let ObjectOr::Object(metadata) = read else { panic!("metadata") };
        assert_eq!(metadata.identity("name"), "a\"b");
    }
}
