//! The string formats the API server checks, as kube-openapi's `strfmt.Default` registry
//! checks them. A format the API server does not know for a type is stripped before
//! validation (apiextensions' `StripUnsupportedFormatsPostProcess`): it is not an error, it
//! just checks nothing.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use regex::Regex;

/// A checked format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `int32` on an integer: range-checked.
    Int32,
    /// `int64` on an integer.
    Int64,
    /// `float` on a number: range-checked.
    Float,
    /// `double` on a number.
    Double,
    /// A string format, by its normalised name (`date-time` is `datetime`).
    String(StringFormat),
}

/// The string formats of `strfmt.Default` that Kubernetes 1.33 supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum StringFormat {
    BsonObjectId,
    Uri,
    Email,
    Hostname,
    Ipv4,
    Ipv6,
    Cidr,
    Mac,
    Uuid,
    Uuid3,
    Uuid4,
    Uuid5,
    Isbn,
    Isbn10,
    Isbn13,
    CreditCard,
    Ssn,
    HexColor,
    RgbColor,
    Byte,
    Password,
    Date,
    Duration,
    DateTime,
}

impl Format {
    /// The format the API server checks for `format` on a schema of type `schema_type`.
    pub fn supported(format: &str, schema_type: &str) -> Option<Format> {
        if format.is_empty() {
            return None;
        }
        match schema_type {
            "integer" => match format {
                "int32" => Some(Format::Int32),
                "int64" => Some(Format::Int64),
                _ => None,
            },
            "number" => match format {
                "float" => Some(Format::Float),
                "double" => Some(Format::Double),
                _ => None,
            },
            "" | "string" => StringFormat::named(&format.replace('-', "")).map(Format::String),
            _ => None,
        }
    }
}

macro_rules! regex {
    ($pattern:expr) => {{
        static RE: LazyLock<Regex> = LazyLock::new(|| Regex::new($pattern).expect("valid built-in pattern"));
        &*RE
    }};
}

impl StringFormat {
    fn named(normalised: &str) -> Option<StringFormat> {
        use StringFormat::*;
        Some(match normalised {
            "bsonobjectid" => BsonObjectId,
            "uri" => Uri,
            "email" => Email,
            "hostname" => Hostname,
            "ipv4" => Ipv4,
            "ipv6" => Ipv6,
            "cidr" => Cidr,
            "mac" => Mac,
            "uuid" => Uuid,
            "uuid3" => Uuid3,
            "uuid4" => Uuid4,
            "uuid5" => Uuid5,
            "isbn" => Isbn,
            "isbn10" => Isbn10,
            "isbn13" => Isbn13,
            "creditcard" => CreditCard,
            "ssn" => Ssn,
            "hexcolor" => HexColor,
            "rgbcolor" => RgbColor,
            "byte" => Byte,
            "password" => Password,
            "date" => Date,
            "duration" => Duration,
            "datetime" => DateTime,
            _ => return None,
        })
    }

    /// Whether `s` is valid in this format.
    pub fn validates(self, s: &str) -> bool {
        use StringFormat::*;
        match self {
            BsonObjectId => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
            Uri => is_request_uri(s),
            Email => is_email(s),
            Hostname => {
                regex!(
                    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$"
                )
                .is_match(s)
                    && s.len() <= 255
                    && s.split('.').all(|label| label.len() <= 63)
            }
            Ipv4 => parse_ip_sloppy(s).is_some() && s.contains('.'),
            Ipv6 => parse_ip_sloppy(s).is_some() && s.contains(':'),
            Cidr => is_cidr(s),
            Mac => is_mac(s),
            Uuid => regex!(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$").is_match(s),
            Uuid3 => regex!(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$").is_match(s),
            Uuid4 => {
                regex!(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$").is_match(s)
            }
            Uuid5 => {
                regex!(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$").is_match(s)
            }
            Isbn => is_isbn10(s) || is_isbn13(s),
            Isbn10 => is_isbn10(s),
            Isbn13 => is_isbn13(s),
            CreditCard => is_credit_card(s),
            Ssn => regex!(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$").is_match(s),
            HexColor => regex!(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$").is_match(s),
            RgbColor => regex!(
                r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$"
            )
            .is_match(s),
            Byte => regex!(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$").is_match(s),
            Password => true,
            Date => is_date(s),
            Duration => is_duration(s),
            DateTime => is_date_time(s),
        }
    }
}

/// `netutils.ParseIPSloppy`: Go's `net.ParseIP` before 1.17, which allows leading zeros in
/// IPv4 octets.
fn parse_ip_sloppy(s: &str) -> Option<IpAddr> {
    if let Some(v4) = parse_ipv4_sloppy(s) {
        return Some(IpAddr::V4(v4));
    }
    if let Some((head, tail)) = s.rsplit_once(':')
        && tail.contains('.')
    {
        let v4 = parse_ipv4_sloppy(tail)?;
        let [a, b, c, d] = v4.octets();
        let head = format!("{head}:{:x}:{:x}", u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]));
        return head.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    s.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
}

fn parse_ipv4_sloppy(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = part.parse().ok()?;
    }
    parts.next().is_none().then_some(Ipv4Addr::from(octets))
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else { return false };
    let max = match parse_ip_sloppy(ip) {
        Some(IpAddr::V4(_)) if !ip.contains(':') => 32,
        Some(_) => 128,
        None => return false,
    };
    !bits.is_empty()
        && bits.len() <= 3
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx:…`, `xx-xx-…` or `xxxx.xxxx.…`.
fn is_mac(s: &str) -> bool {
    let hex = |part: &str, len: usize| part.len() == len && part.bytes().all(|b| b.is_ascii_hexdigit());
    let octets = if s.contains(':') || s.contains('-') {
        let separator = if s.contains(':') { ':' } else { '-' };
        let parts: Vec<&str> = s.split(separator).collect();
        if !parts.iter().all(|p| hex(p, 2)) {
            return false;
        }
        parts.len()
    } else {
        let parts: Vec<&str> = s.split('.').collect();
        if !parts.iter().all(|p| hex(p, 4)) {
            return false;
        }
        parts.len() * 2
    };
    matches!(octets, 6 | 8 | 20)
}

/// `url.ParseRequestURI`: an absolute URI or an absolute path, no control characters.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| c.is_ascii_control()) {
        return false;
    }
    let without_fragment = s.split_once('#').map_or(s, |(head, _)| head);
    if without_fragment.starts_with('/') {
        return true;
    }
    match without_fragment.split_once(':') {
        Some((scheme, rest)) => {
            regex!(r"^[a-zA-Z][a-zA-Z0-9+.\-]*$").is_match(scheme)
                && !rest
                    .strip_prefix("//")
                    .and_then(|after| after.split('/').next())
                    .is_some_and(|host| host.contains(' '))
        }
        None => false,
    }
}

/// `net/mail.ParseAddress` for the forms CRDs meet: `local@domain` or `Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let address = match (s.rfind('<'), s.strip_suffix('>')) {
        (Some(open), Some(inner)) => inner.get(open + 1..).unwrap_or_default(),
        (None, None) => s.trim(),
        _ => return false,
    };
    regex!(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.\-]+@[A-Za-z0-9\-]+(\.[A-Za-z0-9\-]+)*$").is_match(address)
        && !address.starts_with('.')
        && !address.contains("..")
        && !address.contains(".@")
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return false;
    }
    let number = |range: std::ops::Range<usize>| {
        s.get(range).filter(|p| p.bytes().all(|c| c.is_ascii_digit())).and_then(|p| p.parse::<u32>().ok())
    };
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else { return false };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `IsDateTime`: a date, `t`, then `hh:mm:ss[.frac](z|±hh:mm)`, case-insensitive.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    let (Some(date), Some(time)) = (parts.first(), parts.get(1)) else { return false };
    if !is_date(date) {
        return false;
    }
    let Some(caps) = regex!(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$").captures(time)
    else {
        return false;
    };
    &caps[1] <= "23" && &caps[2] <= "59" && &caps[3] <= "59"
}

/// strfmt's `ParseDuration`: Go's `time.ParseDuration`, else `<n> <unit>` groups such as
/// `3 days`.
fn is_duration(s: &str) -> bool {
    if is_go_duration(s) {
        return true;
    }
    const UNITS: [&[&str]; 8] = [
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    regex!(r"((\d+)\s*([A-Za-zµ]+))").captures_iter(s).any(|caps| {
        let unit = caps[3].trim().to_lowercase();
        caps[2].parse::<i64>().is_ok()
            && UNITS.iter().any(|variants| {
                let last = variants.len() - 1;
                variants
                    .iter()
                    .enumerate()
                    .any(|(i, v)| (i == last && unit.starts_with(v)) || v.eq_ignore_ascii_case(&unit))
            })
    })
}

/// `time.ParseDuration`: `[-+]` then one or more `<decimal><unit>`, or `0`.
fn is_go_duration(s: &str) -> bool {
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    body == "0" || regex!(r"^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$").is_match(body)
}

fn isbn_digits(s: &str) -> String {
    s.chars().filter(|c| *c != ' ' && *c != '-').collect()
}

fn is_isbn10(s: &str) -> bool {
    let digits = isbn_digits(s);
    if !regex!(r"^(?:[0-9]{9}X|[0-9]{10})$").is_match(&digits) {
        return false;
    }
    let sum: u32 = digits
        .chars()
        .enumerate()
        .map(|(i, c)| (i as u32 + 1) * if c == 'X' { 10 } else { c.to_digit(10).unwrap_or(0) })
        .sum();
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let digits = isbn_digits(s);
    if !regex!(r"^[0-9]{13}$").is_match(&digits) {
        return false;
    }
    let values: Vec<u32> = digits.chars().filter_map(|c| c.to_digit(10)).collect();
    let Some((check, body)) = values.split_last() else { return false };
    let sum: u32 = body.iter().enumerate().map(|(i, d)| d * if i % 2 == 0 { 1 } else { 3 }).sum();
    (10 - sum % 10) % 10 == *check
}

/// govalidator's `IsCreditCard`: non-digits dropped, a known issuer's pattern, then Luhn.
fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !regex!(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$"
    )
    .is_match(&digits)
    {
        return false;
    }
    let sum: u32 = digits
        .chars()
        .rev()
        .filter_map(|c| c.to_digit(10))
        .enumerate()
        .map(|(i, d)| if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { d })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::StringFormat::*;
    use super::*;

    #[test]
    fn formats_accept_and_refuse_as_strfmt() {
        let cases: &[(StringFormat, &[&str], &[&str])] = &[
            (
                DateTime,
                &["2006-01-02T15:04:05Z", "2006-01-02t15:04:05.123+07:00"],
                &["2006-01-02", "2006-01-02T25:00:00Z", "x"],
            ),
            (Date, &["2024-02-29"], &["2023-02-29", "2024-1-01", "2024-13-01"]),
            (Ipv4, &["10.0.0.1", "010.0.0.1", "::ffff:1.2.3.4"], &["10.0.0", "::1", "256.0.0.1"]),
            (Ipv6, &["::1", "fe80::1", "::ffff:1.2.3.4"], &["10.0.0.1", ":::"]),
            (Cidr, &["10.0.0.0/8", "fd00::/64"], &["10.0.0.0/33", "10.0.0.0", "x/8"]),
            (Mac, &["00:1a:2b:3c:4d:5e", "00-1a-2b-3c-4d-5e", "001a.2b3c.4d5e"], &["00:1a:2b", "zz:1a:2b:3c:4d:5e"]),
            (Uuid, &["123e4567-e89b-12d3-a456-426614174000", "123E4567E89B12D3A456426614174000"], &["123e4567"]),
            (Byte, &["aGVsbG8=", "aGk="], &["aGVsbG8", "!!!!"]),
            (Hostname, &["example.com", "localhost"], &["-bad.com", "a..b"]),
            (Uri, &["https://example.com/a", "/path", "mailto:a@b"], &["relative/path", ""]),
            (Email, &["a@example.com", "Name <a@example.com>"], &["a@", "example.com"]),
            (Duration, &["1h30m", "3 days", "0", "-1.5s"], &["abc", "1x"]),
            (BsonObjectId, &["507f1f77bcf86cd799439011"], &["507f1f77"]),
            (Isbn10, &["0321751043"], &["0321751044"]),
            (Isbn13, &["978-0321751041"], &["978-0321751042"]),
            (CreditCard, &["4111 1111 1111 1111"], &["4111 1111 1111 1112"]),
            (Ssn, &["123-45-6789"], &["123-456-789"]),
            (HexColor, &["#fff", "FFFFFF"], &["#ffff"]),
            (RgbColor, &["rgb(255, 0, 10)"], &["rgb(256,0,0)"]),
        ];
        for (format, valid, invalid) in cases {
            for s in *valid {
                assert!(format.validates(s), "{format:?} should accept {s:?}");
            }
            for s in *invalid {
                assert!(!format.validates(s), "{format:?} should refuse {s:?}");
            }
        }
    }

    #[test]
    fn unsupported_formats_are_stripped_per_type() {
        assert_eq!(Format::supported("date-time", "string"), Some(Format::String(DateTime)));
        assert_eq!(Format::supported("int32", "integer"), Some(Format::Int32));
        assert_eq!(Format::supported("int32", "string"), None);
        assert_eq!(Format::supported("k8s-short-name", "string"), None);
        assert_eq!(Format::supported("float", "integer"), None);
        assert_eq!(Format::supported("date", "object"), None);
    }
}
