//! Values printed the way the Go API server (Kubernetes 1.33) prints them in messages: `%q` for
//! strings ([`quote`]), `%v` for numbers ([`float`], [`number`]) and values ([`display`]), `%#v` (Go syntax) for objects
//! and lists ([`syntax`]), and `encoding/json` (sorted keys, HTML-safe escapes) where upstream
//! marshals ([`json`]).
//!
//! ```
//! use crdctl_model::go;
//!
//! assert_eq!(go::quote("a\"b\n"), r#""a\"b\n""#);
//! assert_eq!(go::float(1e6), "1e+06");
//! assert_eq!(go::display(&serde_json::json!({"b": [1, "x", null], "a": {"c": 1.5}})), "map[a:map[c:1.5] b:[1 x <nil>]]");
//! assert_eq!(go::json(&serde_json::json!({"b": 1, "a": "<"})), r#"{"a":"\u003c","b":1}"#);
//! ```

use serde_json::Value;

/// Quotes a string like Go's `%q`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A bad value as `field.Error.ErrorBody` prints it: null as `"null"`, objects and lists in
/// Go syntax (`map[string]interface {}{"name":"a"}`).
pub fn bad_value(value: &Value) -> String {
    match value {
        Value::Null => quote("null"),
        Value::String(s) => quote(s),
        Value::Number(n) => number(n),
        Value::Bool(b) => b.to_string(),
        _ => syntax(value),
    }
}

/// `fmt.Sprintf("%#v", v)` of a decoded JSON value: maps with sorted keys, `interface {}(nil)`
/// for a null inside a container.
pub fn syntax(value: &Value) -> String {
    let mut out = String::new();
    write_go_syntax(value, &mut out);
    out
}

fn write_go_syntax(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("interface {}(nil)"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => out.push_str(&quote(s)),
        Value::Array(items) => {
            out.push_str("[]interface {}{");
            for (idx, item) in items.iter().enumerate() {
                if idx > 0 {
                    out.push_str(", ");
                }
                write_go_syntax(item, out);
            }
            out.push('}');
        }
        Value::Object(fields) => {
            let mut names: Vec<&String> = fields.keys().collect();
            names.sort();
            out.push_str("map[string]interface {}{");
            for (idx, name) in names.into_iter().enumerate() {
                if idx > 0 {
                    out.push_str(", ");
                }
                out.push_str(&quote(name));
                out.push(':');
                write_go_syntax(&fields[name], out);
            }
            out.push('}');
        }
    }
}

/// `fmt.Sprintf("%v", v)` of a decoded JSON value: `map[a:1 b:[x <nil>]]`, keys sorted.
pub fn display(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => display_list(items),
        Value::Object(fields) => display_map(fields),
    }
}

/// `%v` of a decoded JSON list.
pub fn display_list(items: &[Value]) -> String {
    format!("[{}]", items.iter().map(display).collect::<Vec<_>>().join(" "))
}

/// `%v` of a decoded JSON object: `map[k:v …]`, keys sorted as Go's `fmt` sorts them.
pub fn display_map(fields: &serde_json::Map<String, Value>) -> String {
    let mut keys: Vec<&String> = fields.keys().collect();
    keys.sort();
    let entries: Vec<String> = keys.into_iter().map(|k| format!("{k}:{}", display(&fields[k]))).collect();
    format!("map[{}]", entries.join(" "))
}

/// A number as Go's `%v` prints an `int64` or a `float64`.
pub fn number(n: &serde_json::Number) -> String {
    match (n.as_i64(), n.as_f64()) {
        (Some(i), _) if !n.is_f64() => i.to_string(),
        (_, Some(f)) => float(f),
        _ => n.to_string(),
    }
}

/// The shortest decimal digits of `f` and its decimal exponent: `1.5` is (`"15"`, 0).
fn shortest_digits(f: f64) -> (String, i32) {
    let scientific = format!("{:e}", f.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    (mantissa.replace('.', ""), exponent.parse().unwrap_or(0))
}

fn exponent_form(negative: bool, digits: &str, exponent: i32, min_exponent_digits: usize) -> String {
    let mut out = String::from(if negative { "-" } else { "" });
    let mut rest = digits.chars();
    out.extend(rest.next());
    if !rest.as_str().is_empty() {
        out.push('.');
        out.push_str(rest.as_str());
    }
    out.push('e');
    out.push(if exponent < 0 { '-' } else { '+' });
    out.push_str(&format!("{:0width$}", exponent.unsigned_abs(), width = min_exponent_digits));
    out
}

fn fixed_form(negative: bool, digits: &str, exponent: i32) -> String {
    let mut out = String::from(if negative { "-" } else { "" });
    let point = exponent + 1;
    if point <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat(point.unsigned_abs() as usize));
        out.push_str(digits);
    } else if point as usize >= digits.len() {
        out.push_str(digits);
        out.push_str(&"0".repeat(point as usize - digits.len()));
    } else {
        let (whole, fraction) = digits.split_at_checked(point as usize).unwrap_or((digits, ""));
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    }
    out
}

/// `fmt.Sprintf("%v", f)`: the shortest digits, in exponent form below 1e-4 and from 1e6 on
/// (`strconv.FormatFloat(f, 'g', -1, 64)`).
pub fn float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let (digits, exponent) = shortest_digits(f);
    if !(-4..6).contains(&exponent) {
        exponent_form(f < 0.0, &digits, exponent, 2)
    } else {
        fixed_form(f < 0.0, &digits, exponent)
    }
}

/// A float as `encoding/json` writes it: fixed below 1e21 and from 1e-6, else exponent form
/// with no padded exponent digits.
fn json_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    let (digits, exponent) = shortest_digits(f);
    let abs = f.abs();
    if !(1e-6..1e21).contains(&abs) {
        exponent_form(f < 0.0, &digits, exponent, 1)
    } else {
        fixed_form(f < 0.0, &digits, exponent)
    }
}

/// `json.Marshal` of a decoded value: object keys sorted, `<`, `>`, `&` and U+2028/9 escaped.
pub fn json(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, &mut out);
    out
}

fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) if n.is_f64() => out.push_str(&json_float(n.as_f64().unwrap_or_default())),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (idx, item) in items.iter().enumerate() {
                if idx > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(fields) => {
            let mut names: Vec<&String> = fields.keys().collect();
            names.sort();
            out.push('{');
            for (idx, name) in names.into_iter().enumerate() {
                if idx > 0 {
                    out.push(',');
                }
                write_json_string(name, out);
                out.push(':');
                write_json(&fields[name], out);
            }
            out.push('}');
        }
    }
}

fn write_json_string(s: &str, out: &mut String) {
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

/// A Go duration (`1h30m`, `-1.5s`, `500ms`, `0`) in nanoseconds, as `time.ParseDuration` reads it.
pub fn parse_duration(text: &str) -> Option<i64> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if body == "0" {
        return Some(0);
    }
    if body.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = body;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at_checked(number_end)?;
        let number: f64 = number.parse().ok()?;
        let unit_end = after.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after.len());
        let (unit, after) = after.split_at_checked(unit_end)?;
        let nanos = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = after;
        total += number * nanos;
    }
    Some(if negative { -total } else { total } as i64)
}

/// Go's `time.Duration.String()` of `nanos`: `0s`, `500ms`, `1.5s`, `1m0s`, `1h2m3s`.
pub fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, scale) = match n {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", with_fraction(n, scale));
    }
    let (hours, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (minutes, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let seconds = with_fraction(rest, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{sign}{seconds}s"),
        (0, m) => format!("{sign}{m}m{seconds}s"),
        (h, m) => format!("{sign}{h}h{m}m{seconds}s"),
    }
}

/// `n / scale` with its fraction, trailing zeros trimmed (`1.5`, `2`).
fn with_fraction(n: u64, scale: u64) -> String {
    let (whole, fraction) = (n / scale, n % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = scale.to_string().len() - 1;
    let fraction = format!("{fraction:0digits$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

/// The error Go's `encoding/json` gives for `text` where serde_json failed with `err`: its
/// scanner's words (`unexpected end of JSON input`, `invalid character 'x' looking for
/// beginning of value`), told from the offending character and what serde expected there.
pub fn json_syntax_error(text: &str, err: &serde_json::Error) -> String {
    if err.is_eof() {
        return "unexpected end of JSON input".into();
    }
    let line = text.lines().nth(err.line().saturating_sub(1)).unwrap_or_default();
    let Some(found) = line.chars().nth(err.column().saturating_sub(1)) else {
        return "unexpected end of JSON input".into();
    };
    let expected = err.to_string();
    let context = [
        ("key must be a string", "looking for beginning of object key string"),
        ("expected `:`", "after object key"),
        ("expected `,` or `}`", "after object key:value pair"),
        ("expected `,` or `]`", "after array element"),
        ("trailing characters", "after top-level value"),
        ("trailing comma", "looking for beginning of value"),
        ("invalid escape", "in string escape code"),
        ("control character", "in string literal"),
        ("invalid number", "in numeric literal"),
    ]
    .into_iter()
    .find(|(serde, _)| expected.starts_with(serde))
    .map_or("looking for beginning of value", |(_, go)| go);
    format!("invalid character {} {context}", quote_char(found))
}

/// A character as Go's scanner quotes it (`quoteChar`): `'x'`, `'\''`, `'"'`, `'\n'`.
fn quote_char(c: char) -> String {
    match c {
        '\'' => r"'\''".into(),
        '"' => "'\"'".into(),
        _ => {
            let quoted = quote(&c.to_string());
            format!("'{}'", quoted.trim_start_matches('"').trim_end_matches('"'))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn quote_matches_percent_q() {
        assert_eq!(quote("a\"b\\c\nd\u{0}"), r#""a\"b\\c\nd\x00""#);
        assert_eq!(quote("üäö"), "\"üäö\"");
    }

    #[test]
    fn floats_print_as_go_percent_v() {
        for (f, go) in [
            (1.5, "1.5"),
            (10.0, "10"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5e-7, "-2.5e-07"),
            (1e21, "1e+21"),
        ] {
            assert_eq!(float(f), go, "{f}");
        }
    }

    #[test]
    fn json_matches_encoding_json() {
        let value = json!({"b": [1, 2.5, 1e21, 1e-7, 100.0], "a": "<&>", "c": null});
        assert_eq!(json(&value), r#"{"a":"\u003c\u0026\u003e","b":[1,2.5,1e+21,1e-7,100],"c":null}"#);
    }

    #[test]
    fn bad_values_print_as_error_body() {
        assert_eq!(bad_value(&json!("x")), "\"x\"");
        assert_eq!(bad_value(&json!(3)), "3");
        assert_eq!(bad_value(&json!(3.0)), "3");
        assert_eq!(bad_value(&json!(null)), "\"null\"");
        assert_eq!(
            bad_value(&json!({"name": "a", "n": null})),
            r#"map[string]interface {}{"n":interface {}(nil), "name":"a"}"#
        );
        assert_eq!(bad_value(&json!(["a", 1])), r#"[]interface {}{"a", 1}"#);
    }

    #[test]
    fn durations_print_and_parse_as_go_does() {
        for (nanos, text) in [
            (0, "0s"),
            (1_500_000_000, "1.5s"),
            (3_723_000_000_000, "1h2m3s"),
            (500_000_000, "500ms"),
            (60_000_000_000, "1m0s"),
            (-2_000, "-2µs"),
        ] {
            assert_eq!(format_duration(nanos), text);
            assert_eq!(parse_duration(text), Some(nanos), "{text}");
        }
        assert_eq!(
            (parse_duration("1h30m"), parse_duration("1x"), parse_duration("")),
            (Some(5_400_000_000_000), None, None)
        );
    }

    /// Go's scanner's words for bodies that are not JSON, as `encoding/json` answers them.
    #[test]
    fn json_syntax_errors_read_as_gos_scanner_words_them() {
        let cases = [
            ("{", "unexpected end of JSON input"),
            ("", "unexpected end of JSON input"),
            ("{x", "invalid character 'x' looking for beginning of object key string"),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            ("{\"a\":1 \"b\"}", "invalid character '\"' after object key:value pair"),
            ("[1 2]", "invalid character '2' after array element"),
            ("{} x", "invalid character 'x' after top-level value"),
            ("hello", "invalid character 'h' looking for beginning of value"),
            ("{'a': 1}", "invalid character '\\'' looking for beginning of object key string"),
        ];
        for (text, expected) in cases {
            let err = serde_json::from_str::<Value>(text).unwrap_err();
            assert_eq!(json_syntax_error(text, &err), expected, "{text:?}: serde said {err}");
        }
    }
}
