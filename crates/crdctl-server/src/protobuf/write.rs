//! JSON to protobuf: one serde visitor that writes a message's wire format as it reads the
//! object's JSON, field by field against the descriptor. It reads a parsed value (`&Value` is a
//! serde deserializer) and stored JSON text alike, so a get in protobuf transcodes the stored
//! text without building a parsed copy of it.
//!
//! What a field's JSON holds is written as the field's type says, the way Go's encoder writes
//! the typed object: a number where a string is expected is its text, anything but a number
//! where a number is expected is 0, and `null` writes nothing; fields the message lacks are
//! skipped.

use std::borrow::Cow;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use prost::encoding::{WireType, encode_key, encode_varint};
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::{DURATION, FIELDS_V1, INT_OR_STRING, JSON, MICRO_TIME, QUANTITY, RAW_EXTENSION, TIME};

/// The visitor methods of a value that writes nothing for a scalar (or `null`) where it
/// expects an object or a list, as Go's decoder leaves such a field unset.
macro_rules! ignores_scalars {
    () => {
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }

        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }

        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }

        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }

        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }

        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
    };
}

pub fn write_string(number: u32, text: &str, out: &mut Vec<u8>) {
    write_bytes(number, text.as_bytes(), out);
}

pub fn write_bytes(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// Writes field `number` as the length-delimited bytes `write` appends to `out`, in place: the
/// length is filled in afterwards (one byte reserved, the usual size; longer values move up).
/// `write` answering `false` (a `null`) takes the field back out.
pub fn write_nested<E>(
    number: u32,
    out: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> Result<bool, E>,
) -> Result<(), E> {
    let start = out.len();
    encode_key(number, WireType::LengthDelimited, out);
    let at = out.len();
    out.push(0);
    if !write(out)? {
        out.truncate(start);
        return Ok(());
    }
    let length = out.len() - at - 1;
    let mut prefix = [0u8; 10];
    let mut slot = &mut prefix[..];
    encode_varint(length as u64, &mut slot);
    let written = 10 - slot.len();
    out.splice(at..=at, prefix.into_iter().take(written));
    Ok(())
}

fn write_varint(number: u32, value: u64, out: &mut Vec<u8>) {
    encode_key(number, WireType::Varint, out);
    encode_varint(value, out);
}

/// Writes the message `descriptor` from the JSON object `deserializer` reads; anything but an
/// object writes no field.
pub fn message<'de, D: Deserializer<'de>>(
    descriptor: &MessageDescriptor,
    deserializer: D,
    out: &mut Vec<u8>,
) -> Result<(), D::Error> {
    deserializer.deserialize_any(Fields { descriptor, out })
}

/// The embedded structs of `descriptor` (outermost first) that hold the JSON field `name`, and
/// that field.
fn inlined_field(descriptor: &MessageDescriptor, name: &str) -> Option<(Vec<FieldDescriptor>, FieldDescriptor)> {
    descriptor.fields().filter(|field| super::inlined(descriptor, field)).find_map(|embedded| {
        let Kind::Message(message) = embedded.kind() else { return None };
        match super::field_by_json_name(&message, name).filter(|field| !super::inlined(&message, field)) {
            Some(field) => Some((vec![embedded], field)),
            None => inlined_field(&message, name).map(|(mut embeddings, field)| {
                embeddings.insert(0, embedded);
                (embeddings, field)
            }),
        }
    })
}

/// Writes the map's next value as `field` inside the `embeddings` that hold it.
fn write_embedded<'de, A: MapAccess<'de>>(
    embeddings: &[FieldDescriptor],
    field: &FieldDescriptor,
    map: &mut A,
    out: &mut Vec<u8>,
) -> Result<(), A::Error> {
    match embeddings.split_first() {
        None => map.next_value_seed(Field { field, out, element: false }),
        Some((embedding, inner)) => {
            write_nested(embedding.number(), out, |out| write_embedded(inner, field, map, out).map(|()| true))
        }
    }
}

/// A message's fields, from a JSON object.
struct Fields<'a> {
    descriptor: &'a MessageDescriptor,
    out: &'a mut Vec<u8>,
}

impl<'de> Visitor<'de> for Fields<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Key(name)) = map.next_key()? {
            match super::field_by_json_name(self.descriptor, &name) {
                Some(field) if !super::inlined(self.descriptor, &field) => {
                    map.next_value_seed(Field { field: &field, out: self.out, element: false })?
                }
                // A field of an embedded struct is written inside its field (inside each
                // embedding, for a struct embedded in an embedded one), once per JSON field: a
                // parser merges the occurrences of a message field.
                _ => match inlined_field(self.descriptor, &name) {
                    Some((embeddings, field)) => write_embedded(&embeddings, &field, &mut map, self.out)?,
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        IgnoredAny.visit_seq(seq).map(drop)
    }

    ignores_scalars!();
}

/// A field of a message: all its JSON (a map's entries, a list's elements, or its one value),
/// or, with `element`, one value of it (a list's element, a map entry's value).
struct Field<'a> {
    field: &'a FieldDescriptor,
    out: &'a mut Vec<u8>,
    element: bool,
}

impl<'de> DeserializeSeed<'de> for Field<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if !self.element && (self.field.is_map() || self.field.is_list()) {
            deserializer.deserialize_any(self)
        } else {
            value(self.field, deserializer, self.out)
        }
    }
}

impl<'de> Visitor<'de> for Field<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list or a map")
    }

    /// A map field: each entry a message of the key (field 1) and the value (field 2).
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Kind::Message(entry) = self.field.kind() else { return IgnoredAny.visit_map(map).map(drop) };
        if !self.field.is_map() {
            return IgnoredAny.visit_map(map).map(drop);
        }
        let value_field = entry.map_entry_value_field();
        while let Some(Key(key)) = map.next_key()? {
            write_nested(self.field.number(), self.out, |out| {
                write_string(1, &key, out);
                map.next_value_seed(Field { field: &value_field, out, element: true }).map(|()| true)
            })?;
        }
        Ok(())
    }

    /// A list field: each element written as the field, one after the other.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if !self.field.is_list() {
            return IgnoredAny.visit_seq(seq).map(drop);
        }
        while seq.next_element_seed(Field { field: self.field, out: self.out, element: true })?.is_some() {}
        Ok(())
    }

    ignores_scalars!();
}

fn value<'de, D: Deserializer<'de>>(
    field: &FieldDescriptor,
    deserializer: D,
    out: &mut Vec<u8>,
) -> Result<(), D::Error> {
    let number = field.number();
    let Kind::Message(message) = field.kind() else {
        return match deserializer.deserialize_any(ScalarVisitor)? {
            Scalar::Null => Ok(()),
            scalar => {
                scalar.write(field, out);
                Ok(())
            }
        };
    };
    write_nested(number, out, |out| match message.full_name() {
        // Embedded JSON: its text, as it is.
        RAW_EXTENSION | FIELDS_V1 | JSON => {
            let Some(raw) = Option::<Box<RawValue>>::deserialize(deserializer)? else { return Ok(false) };
            write_bytes(1, raw.get().as_bytes(), out);
            Ok(true)
        }
        TIME | MICRO_TIME | DURATION | QUANTITY | INT_OR_STRING => match deserializer.deserialize_any(ScalarVisitor)? {
            Scalar::Null => Ok(false),
            scalar => {
                special(&message, &scalar, out);
                Ok(true)
            }
        },
        // A list of strings in JSON, a message of them in protobuf.
        name if super::is_string_list(name) => {
            let Some(items) = Option::<Vec<Cow<'de, str>>>::deserialize(deserializer)? else { return Ok(false) };
            items.iter().for_each(|item| write_string(1, item, out));
            Ok(true)
        }
        _ => Ok(deserializer.deserialize_any(NullOr(Fields { descriptor: &message, out }))?.is_some()),
    })
}

/// The types whose JSON is a string (or a number) rather than their message's fields.
fn special(message: &MessageDescriptor, scalar: &Scalar, out: &mut Vec<u8>) {
    match message.full_name() {
        TIME | MICRO_TIME => {
            let text = scalar.text();
            if let Ok(at) = time::OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339) {
                write_varint(1, at.unix_timestamp() as u64, out);
                if message.full_name() == MICRO_TIME && at.nanosecond() != 0 {
                    write_varint(2, u64::from(at.nanosecond()), out);
                }
            }
        }
        DURATION => write_varint(1, crdctl_model::go::parse_duration(&scalar.text()).unwrap_or(0) as u64, out),
        QUANTITY => write_string(1, &scalar.text(), out),
        INT_OR_STRING => match scalar {
            Scalar::Str(text) => {
                write_varint(1, 1, out);
                write_string(3, text, out);
            }
            other => {
                write_varint(1, 0, out);
                write_varint(2, other.as_i64() as u64, out);
            }
        },
        _ => {}
    }
}

/// A JSON scalar as read (a list or an object where a scalar belongs reads as `Other`).
enum Scalar<'de> {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(Cow<'de, str>),
    Other,
}

impl Scalar<'_> {
    /// The scalar as JSON text would spell it (a string as itself).
    fn text(&self) -> Cow<'_, str> {
        match self {
            Scalar::Str(text) => Cow::Borrowed(text),
            Scalar::Bool(b) => Cow::Owned(b.to_string()),
            Scalar::I64(n) => Cow::Owned(n.to_string()),
            Scalar::U64(n) => Cow::Owned(n.to_string()),
            Scalar::F64(n) => Cow::Owned(serde_json::Value::from(*n).to_string()),
            Scalar::Null | Scalar::Other => Cow::Borrowed(""),
        }
    }

    fn as_i64(&self) -> i64 {
        match self {
            Scalar::I64(n) => *n,
            Scalar::U64(n) => i64::try_from(*n).unwrap_or(0),
            Scalar::F64(n) => *n as i64,
            _ => 0,
        }
    }

    fn as_f64(&self) -> f64 {
        match self {
            Scalar::I64(n) => *n as f64,
            Scalar::U64(n) => *n as f64,
            Scalar::F64(n) => *n,
            _ => 0.0,
        }
    }

    /// Writes the scalar as a field of a scalar kind.
    fn write(&self, field: &FieldDescriptor, out: &mut Vec<u8>) {
        let number = field.number();
        match field.kind() {
            Kind::String => write_string(number, &self.text(), out),
            Kind::Bytes => {
                let bytes = match self {
                    Scalar::Str(text) => STANDARD.decode(text.as_bytes()).unwrap_or_default(),
                    _ => Vec::new(),
                };
                write_bytes(number, &bytes, out);
            }
            Kind::Bool => write_varint(number, u64::from(matches!(self, Scalar::Bool(true))), out),
            Kind::Int32 | Kind::Int64 | Kind::Enum(_) => write_varint(number, self.as_i64() as u64, out),
            Kind::Uint32 | Kind::Uint64 => {
                let n = match self {
                    Scalar::U64(n) => *n,
                    Scalar::I64(n) => u64::try_from(*n).unwrap_or(0),
                    _ => 0,
                };
                write_varint(number, n, out);
            }
            Kind::Sint32 | Kind::Sint64 => {
                let n = self.as_i64();
                write_varint(number, ((n << 1) ^ (n >> 63)) as u64, out);
            }
            Kind::Double => {
                encode_key(number, WireType::SixtyFourBit, out);
                out.extend_from_slice(&self.as_f64().to_bits().to_le_bytes());
            }
            Kind::Fixed64 | Kind::Sfixed64 => {
                encode_key(number, WireType::SixtyFourBit, out);
                out.extend_from_slice(&(self.as_i64() as u64).to_le_bytes());
            }
            Kind::Float => {
                encode_key(number, WireType::ThirtyTwoBit, out);
                out.extend_from_slice(&(self.as_f64() as f32).to_bits().to_le_bytes());
            }
            Kind::Fixed32 | Kind::Sfixed32 => {
                encode_key(number, WireType::ThirtyTwoBit, out);
                out.extend_from_slice(&(self.as_i64() as u32).to_le_bytes());
            }
            Kind::Message(_) => {}
        }
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Null)
    }

    fn visit_none<E>(self) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::I64(n))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::U64(n))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::F64(n))
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Owned(text.to_string())))
    }

    fn visit_string<E>(self, text: String) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Str(Cow::Owned(text)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Scalar<'de>, A::Error> {
        IgnoredAny.visit_seq(seq).map(|_| Scalar::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar<'de>, A::Error> {
        IgnoredAny.visit_map(map).map(|_| Scalar::Other)
    }
}

/// A message value that may be `null` (then `None`: nothing is written).
struct NullOr<'a>(Fields<'a>);

impl<'de> Visitor<'de> for NullOr<'_> {
    type Value = Option<()>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object or null")
    }

    fn visit_unit<E>(self) -> Result<Option<()>, E> {
        Ok(None)
    }

    fn visit_none<E>(self) -> Result<Option<()>, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<()>, A::Error> {
        self.0.visit_map(map).map(Some)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<()>, A::Error> {
        self.0.visit_seq(seq).map(Some)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Option<()>, E> {
        Ok(Some(()))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Option<()>, E> {
        Ok(Some(()))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Option<()>, E> {
        Ok(Some(()))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Option<()>, E> {
        Ok(Some(()))
    }

    fn visit_str<E>(self, _: &str) -> Result<Option<()>, E> {
        Ok(Some(()))
    }
}

/// A JSON object's key, borrowed from the text (or the parsed value) when it can be.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Key<'de>, D::Error> {
        match deserializer.deserialize_str(ScalarVisitor)? {
            Scalar::Str(text) => Ok(Key(text)),
            _ => Ok(Key(Cow::Borrowed(""))),
        }
    }
}
