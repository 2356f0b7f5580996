//! JSON objects read and edited as text: each field's value is the text it was written as,
//! borrowed from the input and never parsed into values, and [`splice`] is the one way text is
//! edited (the server sets `resourceVersion` and `apiVersion` in stored objects with it).
//!
//! A list read through a conversion webhook goes from the webhook's answer to the reader without
//! building values: the conversion client keeps a converted object's fields as text, and
//! `crdctl_schema::prune_json` prunes that text by the schema. Both read objects with
//! [`Fields`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// An object's fields in order, as text. A key sent twice is kept once, where it came first,
/// with the value sent last, as a JSON decoder reads it (and as [`serde_json::Map`] does).
#[derive(Debug, Default)]
pub struct Fields<'a> {
    entries: Vec<(Cow<'a, str>, &'a RawValue)>,
    /// Past [`Fields::INDEXED`] keys, where each key is: a hostile object stays linear.
    index: Option<HashMap<Cow<'a, str>, usize>>,
}

impl<'a> Fields<'a> {
    const INDEXED: usize = 32;

    /// Reads the fields of the object `json`.
    pub fn parse(json: &'a str) -> Result<Fields<'a>, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// Adds a field, or replaces the value of the one already under `key`.
    pub fn insert(&mut self, key: Cow<'a, str>, value: &'a RawValue) {
        if self.index.is_none() && self.entries.len() >= Fields::INDEXED {
            self.index = Some(self.entries.iter().enumerate().map(|(at, (name, _))| (name.clone(), at)).collect());
        }
        let existing = match &self.index {
            None => self.entries.iter().position(|(name, _)| *name == key),
            Some(index) => index.get(&key).copied(),
        };
        match existing.and_then(|at| self.entries.get_mut(at)) {
            Some(entry) => entry.1 = value,
            None => {
                if let Some(index) = &mut self.index {
                    index.insert(key.clone(), self.entries.len());
                }
                self.entries.push((key, value));
            }
        }
    }

    /// How many fields there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The fields, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &'a RawValue)> {
        self.entries.iter().map(|(key, value)| (key.as_ref(), *value))
    }

    /// The text of field `key`.
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.iter().find(|(name, _)| *name == key).map(|(_, value)| value)
    }
}

/// Writes `key` as a JSON string and a colon.
pub fn write_key(out: &mut Vec<u8>, key: &str) {
    // Writing a string into memory cannot fail.
    let _ = serde_json::to_writer(&mut *out, key);
    out.push(b':');
}

/// An edit of one field of an object, for [`splice`].
#[derive(Debug, Clone, Copy)]
pub enum Splice<'e> {
    /// The field's value becomes this JSON text.
    Set(&'e str),
    /// The field's value is an object edited in turn; a value that is not an object is replaced
    /// by one holding only the edits.
    Object(&'e [(&'e str, Splice<'e>)]),
}

/// Writes the object `fields` with `edits` applied, as setting the fields on a decoded object
/// would: an edited field keeps its place, one that was missing goes last, in the order of
/// `edits`, and every other field is copied as it was written. Keys are matched as a decoder
/// reads them, escapes included.
///
/// ```
/// use crdctl_model::json::{Fields, Splice, splice};
///
/// let stored = r#"{"metadata":{"name":"a","resource\u0056ersion":"1"},"spec":{"x":1}}"#;
/// let mut out = Vec::new();
/// let metadata = [("resourceVersion", Splice::Set(r#""42""#))];
/// splice(&Fields::parse(stored).unwrap(), &[("metadata", Splice::Object(&metadata)), ("apiVersion", Splice::Set(r#""v1""#))], &mut out);
/// assert_eq!(String::from_utf8(out).unwrap(), r#"{"metadata":{"name":"a","resourceVersion":"42"},"spec":{"x":1},"apiVersion":"v1"}"#);
/// ```
pub fn splice(fields: &Fields<'_>, edits: &[(&str, Splice<'_>)], out: &mut Vec<u8>) {
    out.push(b'{');
    let start = out.len();
    let field = |out: &mut Vec<u8>, name: &str| {
        if out.len() > start {
            out.push(b',');
        }
        write_key(out, name);
    };
    for (name, value) in fields.iter() {
        field(out, name);
        match edits.iter().find(|(edited, _)| *edited == name) {
            Some((_, edit)) => write_edit(edit, Some(value.get()), out),
            None => out.extend_from_slice(value.get().as_bytes()),
        }
    }
    for (name, edit) in edits.iter().filter(|(name, _)| fields.get(name).is_none()) {
        field(out, name);
        write_edit(edit, None, out);
    }
    out.push(b'}');
}

fn write_edit(edit: &Splice<'_>, old: Option<&str>, out: &mut Vec<u8>) {
    match edit {
        Splice::Set(text) => out.extend_from_slice(text.as_bytes()),
        Splice::Object(edits) => {
            let fields = old.and_then(|text| Fields::parse(text).ok()).unwrap_or_default();
            splice(&fields, edits, out);
        }
    }
}

/// A key, borrowed from the input when it has no escapes.
pub struct Key<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(value)))
            }
            fn visit_str<E>(self, value: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(value.to_string())))
            }
            fn visit_string<E>(self, value: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(value)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
                let mut fields = Fields::default();
                while let Some(Key(key)) = map.next_key()? {
                    fields.insert(key, map.next_value()?);
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_their_text_and_order() {
        let fields = Fields::parse(r#"{"b": [1, 2], "a\"": {"x": "y"}, "c": 1e3}"#).unwrap();
        let read: Vec<(&str, &str)> = fields.iter().map(|(key, value)| (key, value.get())).collect();
        assert_eq!(read, [("b", "[1, 2]"), ("a\"", r#"{"x": "y"}"#), ("c", "1e3")]);
        assert!(Fields::parse("[1]").is_err());
    }

    #[test]
    fn splice_edits_in_place_and_adds_the_rest_last() {
        let rv = [("resourceVersion", Splice::Set("\"7\""))];
        let edits = [("metadata", Splice::Object(&rv))];
        for (stored, expected) in [
            (
                r#"{"a":1,"metadata":{"resourceVersion":"1","name":"n"}}"#,
                r#"{"a":1,"metadata":{"resourceVersion":"7","name":"n"}}"#,
            ),
            (r#"{"metadata":null,"a":[1]}"#, r#"{"metadata":{"resourceVersion":"7"},"a":[1]}"#),
            (
                r#"{"metadata":{"name":"n","annotations":{"resourceVersion":"x"}}}"#,
                r#"{"metadata":{"name":"n","annotations":{"resourceVersion":"x"},"resourceVersion":"7"}}"#,
            ),
            (r#"{}"#, r#"{"metadata":{"resourceVersion":"7"}}"#),
            (r#"{"metadata":{"r":1,"r":2}}"#, r#"{"metadata":{"r":2,"resourceVersion":"7"}}"#),
        ] {
            let mut out = Vec::new();
            splice(&Fields::parse(stored).unwrap(), &edits, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{stored}");
        }
    }

    #[test]
    fn a_key_sent_twice_is_kept_where_it_came_first_with_the_last_value() {
        let fields = Fields::parse(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap();
        let read: Vec<(&str, &str)> = fields.iter().map(|(key, value)| (key, value.get())).collect();
        assert_eq!(read, [("a", "3"), ("b", "2")]);
        // The same past the point where keys are indexed.
        let mut json: Vec<String> = (0..100).map(|i| format!("\"k{i}\": {i}")).collect();
        json.push("\"k7\": \"again\"".into());
        let json = format!("{{{}}}", json.join(","));
        let fields = Fields::parse(&json).unwrap();
        assert_eq!(fields.len(), 100);
        assert_eq!(fields.get("k7").map(RawValue::get), Some("\"again\""));
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&json).unwrap();
        assert!(map.keys().map(String::as_str).eq(fields.iter().map(|(key, _)| key)), "the order a decoder keeps");
    }
}
