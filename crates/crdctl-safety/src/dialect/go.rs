//! Go's formatting, which OLM's messages are made of: `encoding/json` text (sorted keys, HTML
//! characters escaped), `%v` of floats (shortest digits, exponent from 1e+06), `%q` strings.
//! The renderings themselves live in the model (`crdctl_model::go`); this adds the
//! ones only OLM's texts use.

use serde_json::Value;

pub use crdctl_model::go::quote;

/// A value as Go's `encoding/json` writes it (compact, keys sorted, HTML characters escaped),
/// and `%v` of a float64: the model's renderings, which the API-server messages use too.
pub use crdctl_model::go::{float as float_v, json as json_text};

/// `%v` of a bound: floats for `maximum`/`minimum`, decimal integers for the rest.
pub fn number_v(value: &Value, is_float: bool) -> String {
    match (value.as_f64(), is_float) {
        (Some(f), true) => float_v(f),
        (_, false) if value.is_i64() || value.is_u64() => value.to_string(),
        (Some(f), false) => format!("{}", f as i64),
        _ => json_text(value),
    }
}

/// `%v` of a `[]string`: `[a b c]`.
pub fn list_v<S: AsRef<str>>(items: &[S]) -> String {
    let items: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("[{}]", items.join(" "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn float_v_matches_go() {
        let cases = [
            (10.0, "10"),
            (0.5, "0.5"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.00001, "1e-05"),
            (0.0001, "0.0001"),
            (-2.5, "-2.5"),
            (1e21, "1e+21"),
            (123.456, "123.456"),
        ];
        for (f, expected) in cases {
            assert_eq!(float_v(f), expected, "{f}");
        }
    }

    #[test]
    fn json_text_matches_encoding_json() {
        assert_eq!(
            json_text(&json!({"b": 1, "a": [true, null, "x<y & z>"]})),
            r#"{"a":[true,null,"x\u003cy \u0026 z\u003e"],"b":1}"#
        );
        assert_eq!(json_text(&json!(1.5)), "1.5");
        assert_eq!(json_text(&json!(2.0)), "2");
        assert_eq!(json_text(&json!(1e-7)), "1e-7");
        assert_eq!(json_text(&json!(1e21)), "1e+21");
        assert_eq!(json_text(&json!("tab\there")), r#""tab\there""#);
    }

    #[test]
    fn quoted_json_defaults() {
        assert_eq!(quote(&json_text(&json!("Managed"))), r#""\"Managed\"""#);
        assert_eq!(quote(&json_text(&json!({}))), r#""{}""#);
    }

    #[test]
    fn bounds_print_like_go() {
        assert_eq!(number_v(&json!(10), true), "10");
        assert_eq!(number_v(&json!(1000000), true), "1e+06");
        assert_eq!(number_v(&json!(1000000), false), "1000000");
        assert_eq!(list_v(&["a", "b"]), "[a b]");
    }
}
