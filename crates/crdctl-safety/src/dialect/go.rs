//! Go's formatting, which OLM's messages are made of: `encoding/json` text (sorted keys, HTML
//! characters escaped), `%v` of floats (shortest digits, exponent from 1e+06), `%q` strings.

use serde_json::{Number, Value};

pub use crdctl_model::validation::go_quote as quote;

/// A value as Go's `encoding/json` writes it: compact, object keys sorted, `<`, `>` and `&`
/// escaped, integers without a fraction, floats in shortest form.
pub fn json_text(value: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, value);
    out
}

fn write_json(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&json_number(n)),
        Value::String(s) => write_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (idx, item) in items.iter().enumerate() {
                if idx > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (idx, (key, item)) in entries.into_iter().enumerate() {
                if idx > 0 {
                    out.push(',');
                }
                write_json_string(out, key);
                out.push(':');
                write_json(out, item);
            }
            out.push('}');
        }
    }
}

fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON number as Go encodes it: integers as decimals; floats with `'f'`, or `'e'` below 1e-6
/// and from 1e21, with the exponent's leading zero dropped (`1e-7`, `1e+21`).
fn json_number(n: &Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or_default();
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format_e(f);
        // Go's encoder writes e-07 as e-7.
        match text.split_once("e-0") {
            Some((mantissa, exp)) if exp.len() == 1 => format!("{mantissa}e-{exp}"),
            _ => text,
        }
    } else {
        format_f(f)
    }
}

/// `%v` of a float64: shortest digits, exponent form when the exponent is below -4 or at least 6.
pub fn float_v(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return format!("{f}");
    }
    let (_, exp) = shortest(f);
    if !(-4..6).contains(&exp) { format_e(f) } else { format_f(f) }
}

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

/// Shortest round-trip digits and the decimal exponent of the first digit.
fn shortest(f: f64) -> (String, i32) {
    let text = format!("{:e}", f.abs());
    let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
    (mantissa.replace('.', ""), exp.parse().unwrap_or(0))
}

/// Go's `'e'` with shortest precision: `1.234567e+06`.
fn format_e(f: f64) -> String {
    let (digits, exp) = shortest(f);
    let sign = if f < 0.0 { "-" } else { "" };
    let mantissa = if digits.len() > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits };
    let exp_sign = if exp < 0 { '-' } else { '+' };
    format!("{sign}{mantissa}e{exp_sign}{:02}", exp.abs())
}

/// Go's `'f'` with shortest precision: no exponent.
fn format_f(f: f64) -> String {
    let (digits, exp) = shortest(f);
    let sign = if f < 0.0 { "-" } else { "" };
    let body = if exp < 0 {
        format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
    } else if (exp as usize) + 1 >= digits.len() {
        format!("{digits}{}", "0".repeat(exp as usize + 1 - digits.len()))
    } else {
        format!("{}.{}", &digits[..=exp as usize], &digits[exp as usize + 1..])
    };
    format!("{sign}{body}")
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
