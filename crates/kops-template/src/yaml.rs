//! A YAML writer that lays documents out the way `sigs.k8s.io/yaml.Marshal` (go-yaml v2)
//! does, so `--format-yaml` output matches kops byte for byte in the common cases:
//! keys in go-yaml's "natural" order (digit runs compared as numbers), sequences not
//! indented under their key, strings plain when they would read back as strings,
//! `'single'` quoted when plain is not allowed, `"double"` quoted when they would read
//! back as something else, `|` literal blocks for multi-line text, and plain or quoted
//! text wrapped at spaces past column 80.
//!
//! Values are JSON-shaped, as kops' are after the JSON round trip: whole floats are
//! integers.

use std::cmp::Ordering;

use serde_json::Value;

use crate::gofmt;

const BEST_WIDTH: usize = 80;

/// `yaml.Marshal(v)` of a JSON-shaped value.
pub fn marshal(v: &Value) -> String {
    let mut e = Emitter { out: String::new() };
    match v {
        Value::Object(m) if !m.is_empty() => e.mapping(v, 0, false),
        Value::Array(a) if !a.is_empty() => e.sequence(a, 0, false),
        other => {
            e.scalar(other, 0, false);
            e.newline();
        }
    }
    e.out
}

struct Emitter {
    out: String,
}

fn is_space(c: char) -> bool {
    c == ' '
}

fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || u == 0x85
        || (0xA0..=0xD7FF).contains(&u)
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
        || u >= 0x10000
}

/// go-yaml v2's ordering of map keys.
pub fn key_less(a: &str, b: &str) -> Ordering {
    let (ar, br): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let (al, bl) = (ar[i].is_alphabetic(), br[i].is_alphabetic());
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            return if bl {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .wrapping_mul(10)
                .wrapping_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an.cmp(&bn);
        }
        if ai != bi {
            return ai.cmp(&bi);
        }
        return ar[i].cmp(&br[i]);
    }
    ar.len().cmp(&br.len())
}

/// Whether a plain scalar `s` would be read back by go-yaml v2 as something other than a
/// string (null, bool, number, timestamp, base-60 number).
fn resolves_to_non_string(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
        "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
        ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
        ".NaN", ".NAN", "<<",
    ];
    if WORDS.contains(&s) {
        return true;
    }
    let Some(first) = s.chars().next() else {
        return true;
    };
    if !(first.is_ascii_digit() || matches!(first, '+' | '-' | '.')) {
        return false;
    }
    let plain: String = s.chars().filter(|c| *c != '_').collect();
    let body = plain.trim_start_matches(['+', '-']);
    let lower = body.to_ascii_lowercase();
    let int = if let Some(h) = lower.strip_prefix("0x") {
        !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit())
    } else if let Some(b) = lower.strip_prefix("0b") {
        !b.is_empty() && b.chars().all(|c| c == '0' || c == '1')
    } else if let Some(o) = lower.strip_prefix("0o") {
        !o.is_empty() && o.chars().all(|c| ('0'..='7').contains(&c))
    } else {
        !body.is_empty() && body.chars().all(|c| c.is_ascii_digit())
    };
    if int {
        return true;
    }
    let floaty = body
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        || matches!(lower.as_str(), "inf" | "infinity" | "nan");
    if floaty && plain.parse::<f64>().is_ok() {
        return true;
    }
    is_timestamp(s) || is_base60(s)
}

fn is_timestamp(s: &str) -> bool {
    // YYYY-M-D, optionally followed by a time ("T" or spaces then hh:mm:ss...).
    let b = s.as_bytes();
    if b.len() < 8 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let rest = &s[5..];
    let mut parts = rest.splitn(3, '-');
    let (Some(m), Some(d)) = (parts.next(), parts.next()) else {
        return false;
    };
    let d = d.split(['T', 't', ' ', '\t']).next().unwrap_or("");
    let ok = |x: &str| (1..=2).contains(&x.len()) && x.bytes().all(|c| c.is_ascii_digit());
    ok(m) && ok(d) && {
        let date_len = 5 + m.len() + 1 + d.len();
        date_len == s.len() || s[date_len..].starts_with(['T', 't', ' ', '\t'])
    }
}

fn is_base60(s: &str) -> bool {
    let t = s.trim_start_matches(['+', '-']);
    let mut parts = t.split(':');
    let Some(head) = parts.next() else {
        return false;
    };
    if head.is_empty()
        || !head.starts_with(|c: char| c.is_ascii_digit())
        || !head.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return false;
    }
    let rest: Vec<&str> = parts.collect();
    if rest.is_empty() {
        return false;
    }
    for (i, p) in rest.iter().enumerate() {
        let (int, frac) = match p.split_once('.') {
            Some((a, f)) if i == rest.len() - 1 => (a, Some(f)),
            Some(_) => return false,
            None => (*p, None),
        };
        let digits_ok = (1..=2).contains(&int.len())
            && int.chars().all(|c| c.is_ascii_digit())
            && (int.len() == 1 || int.as_bytes()[0] <= b'5');
        if !digits_ok || frac.is_some_and(|f| !f.chars().all(|c| c.is_ascii_digit() || c == '_')) {
            return false;
        }
    }
    true
}

#[derive(Clone, Copy, PartialEq)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

/// libyaml's scalar analysis: which styles can hold `s` in block context.
fn choose_style(s: &str, simple_key: bool) -> Style {
    let requested = if !s.is_empty() && s.contains('\n') && !simple_key {
        Style::Literal
    } else if resolves_to_non_string(s) {
        Style::Double
    } else {
        Style::Plain
    };
    let chars: Vec<char> = s.chars().collect();
    let (mut block_ind, mut special, mut line_breaks) = (false, false, false);
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut prev_space, mut prev_break) = (false, false);
    if s.starts_with("---") || s.starts_with("...") {
        block_ind = true;
    }
    let mut preceded_by_ws = true;
    for (i, &c) in chars.iter().enumerate() {
        let next = chars.get(i + 1).copied();
        let followed_by_ws = next.is_none_or(|n| is_space(n) || n == '\t' || is_break(n));
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => block_ind = true,
                '?' | ':' | '-' if followed_by_ws => block_ind = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_ws => block_ind = true,
                '#' if preceded_by_ws => block_ind = true,
                _ => {}
            }
        }
        if !is_printable(c) {
            special = true;
        }
        if is_break(c) {
            line_breaks = true;
        }
        let last = i + 1 == chars.len();
        if is_space(c) {
            if i == 0 {
                leading_space = true;
            }
            if last {
                trailing_space = true;
            }
            if prev_break {
                break_space = true;
            }
            prev_space = true;
            prev_break = false;
        } else if is_break(c) {
            if i == 0 {
                leading_break = true;
            }
            if last {
                trailing_break = true;
            }
            if prev_space {
                space_break = true;
            }
            prev_break = true;
            prev_space = false;
        } else {
            prev_space = false;
            prev_break = false;
        }
        preceded_by_ws = is_space(c) || c == '\t' || is_break(c);
    }
    let mut plain_ok = !(leading_space || leading_break || trailing_space || trailing_break);
    let mut single_ok = true;
    let mut block_ok = !trailing_space;
    if break_space {
        plain_ok = false;
        single_ok = false;
    }
    if space_break || special {
        plain_ok = false;
        single_ok = false;
        block_ok = false;
    }
    if line_breaks || block_ind {
        plain_ok = false;
    }
    if s.is_empty() {
        plain_ok = false;
    }
    match requested {
        Style::Plain if plain_ok && !(simple_key && line_breaks) => Style::Plain,
        Style::Plain | Style::Single if single_ok && !(simple_key && line_breaks) => Style::Single,
        Style::Literal if block_ok => Style::Literal,
        _ => Style::Double,
    }
}

impl Emitter {
    fn column(&self) -> usize {
        match self.out.rfind('\n') {
            Some(i) => self.out[i + 1..].chars().count(),
            None => self.out.chars().count(),
        }
    }

    fn newline(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
    }

    fn indent(&mut self, n: usize) {
        self.out.push('\n');
        self.out.push_str(&" ".repeat(n));
    }

    fn mapping(&mut self, v: &Value, indent: usize, inline_first: bool) {
        let Value::Object(m) = v else { return };
        let mut keys: Vec<&String> = m.keys().collect();
        keys.sort_by(|a, b| key_less(a, b));
        for (i, k) in keys.iter().enumerate() {
            if !(i == 0 && inline_first) {
                self.newline();
                self.out.push_str(&" ".repeat(indent));
            }
            self.string(k, indent, true);
            self.out.push(':');
            let val = &m[*k];
            match val {
                Value::Object(o) if !o.is_empty() => {
                    self.out.push('\n');
                    self.mapping(val, indent + 2, false);
                }
                Value::Array(a) if !a.is_empty() => {
                    self.out.push('\n');
                    self.sequence(a, indent, false);
                }
                _ => {
                    self.out.push(' ');
                    self.scalar(val, indent + 2, false);
                    self.newline();
                }
            }
        }
    }

    fn sequence(&mut self, a: &[Value], indent: usize, inline_first: bool) {
        for (i, item) in a.iter().enumerate() {
            if !(i == 0 && inline_first) {
                self.newline();
                self.out.push_str(&" ".repeat(indent));
            }
            self.out.push_str("- ");
            match item {
                Value::Object(o) if !o.is_empty() => self.mapping(item, indent + 2, true),
                Value::Array(x) if !x.is_empty() => self.sequence(x, indent + 2, true),
                _ => {
                    self.scalar(item, indent + 2, false);
                    self.newline();
                }
            }
        }
    }

    fn scalar(&mut self, v: &Value, indent: usize, simple_key: bool) {
        match v {
            Value::Null => self.out.push_str("null"),
            Value::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => {
                let s = match n.as_f64() {
                    Some(f) if n.is_f64() && f.is_infinite() => {
                        if f > 0.0 { ".inf" } else { "-.inf" }.to_string()
                    }
                    Some(f) if n.is_f64() && f.is_nan() => ".nan".to_string(),
                    _ => gofmt::number_v(n),
                };
                self.out.push_str(&s);
            }
            Value::String(s) => self.string(s, indent, simple_key),
            Value::Array(_) => self.out.push_str("[]"),
            Value::Object(_) => self.out.push_str("{}"),
        }
    }

    fn string(&mut self, s: &str, indent: usize, simple_key: bool) {
        let breaks = !simple_key;
        match choose_style(s, simple_key) {
            Style::Plain => self.wrapped(s, indent, breaks, None),
            Style::Single => {
                self.out.push('\'');
                self.wrapped(s, indent, breaks, Some('\''));
                self.out.push('\'');
            }
            Style::Double => self.double(s, indent, breaks),
            Style::Literal => self.literal(s, indent),
        }
    }

    /// Plain or single-quoted text, breaking at a space once past the line width.
    fn wrapped(&mut self, s: &str, indent: usize, breaks: bool, quote: Option<char>) {
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        let mut column = self.column();
        for (i, &c) in chars.iter().enumerate() {
            if is_space(c) {
                let inner = quote.is_none() || (i != 0 && i + 1 != chars.len());
                let next_space = chars.get(i + 1).is_some_and(|n| is_space(*n));
                if breaks && !spaces && column > BEST_WIDTH && inner && !next_space {
                    self.indent(indent);
                    column = indent;
                } else {
                    self.out.push(c);
                    column += 1;
                }
                spaces = true;
            } else {
                if quote == Some(c) {
                    self.out.push(c);
                    column += 1;
                }
                self.out.push(c);
                column += 1;
                spaces = false;
            }
        }
    }

    fn double(&mut self, s: &str, indent: usize, breaks: bool) {
        self.out.push('"');
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        let mut column = self.column();
        for (i, &c) in chars.iter().enumerate() {
            if !is_printable(c) || c == '\u{FEFF}' || is_break(c) || c == '"' || c == '\\' {
                let esc = match c {
                    '\0' => "\\0".to_string(),
                    '\x07' => "\\a".into(),
                    '\x08' => "\\b".into(),
                    '\t' => "\\t".into(),
                    '\n' => "\\n".into(),
                    '\x0b' => "\\v".into(),
                    '\x0c' => "\\f".into(),
                    '\r' => "\\r".into(),
                    '\x1b' => "\\e".into(),
                    '"' => "\\\"".into(),
                    '\\' => "\\\\".into(),
                    '\u{85}' => "\\N".into(),
                    '\u{a0}' => "\\_".into(),
                    '\u{2028}' => "\\L".into(),
                    '\u{2029}' => "\\P".into(),
                    c if (c as u32) <= 0xFF => format!("\\x{:02X}", c as u32),
                    c if (c as u32) <= 0xFFFF => format!("\\u{:04X}", c as u32),
                    c => format!("\\U{:08X}", c as u32),
                };
                column += esc.len();
                self.out.push_str(&esc);
                spaces = false;
            } else if is_space(c) {
                if breaks && !spaces && column > BEST_WIDTH && i != 0 && i + 1 != chars.len() {
                    self.indent(indent);
                    column = indent;
                    if chars.get(i + 1).is_some_and(|n| is_space(*n)) {
                        self.out.push('\\');
                        column += 1;
                    }
                } else {
                    self.out.push(c);
                    column += 1;
                }
                spaces = true;
            } else {
                self.out.push(c);
                column += 1;
                spaces = false;
            }
        }
        self.out.push('"');
    }

    fn literal(&mut self, s: &str, indent: usize) {
        self.out.push('|');
        if s.starts_with([' ', '\n']) {
            self.out.push('2');
        }
        if !s.ends_with('\n') {
            self.out.push('-');
        } else if s.len() == 1 || s[..s.len() - 1].ends_with('\n') {
            self.out.push('+');
        }
        self.out.push('\n');
        let body = s.strip_suffix('\n').unwrap_or(s);
        for line in body.split('\n') {
            if !line.is_empty() {
                self.out.push_str(&" ".repeat(indent));
                self.out.push_str(line);
            }
            self.out.push('\n');
        }
    }
}

/// YAML the way `sigs.k8s.io/yaml.Marshal` writes a value: through JSON (so whole
/// floats become integers), then go-yaml v2's layout.
pub fn to_yaml(v: &Value) -> Result<String, String> {
    Ok(marshal(&json_round_trip(v)))
}

/// What a value looks like after Go's JSON encode + YAML decode: whole floats are ints.
fn json_round_trip(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(0.0);
            if f.fract() == 0.0 && f.abs() < 9.0e18 {
                Value::from(f as i64)
            } else {
                v.clone()
            }
        }
        Value::Array(a) => Value::Array(a.iter().map(json_round_trip).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), json_round_trip(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn layout_like_go_yaml_v2() {
        let v = json!({
            "spec": {"subnets": [{"name": "a", "zone": "eu-west-1a"}], "empty": {}, "none": [], "n": null},
            "apiVersion": "kops.k8s.io/v1alpha2",
            "list": [["x"], 1.5, true],
        });
        assert_eq!(
            marshal(&v),
            "apiVersion: kops.k8s.io/v1alpha2\nlist:\n- - x\n- 1.5\n- true\nspec:\n  empty: {}\n  \"n\": null\n  none: []\n  subnets:\n  - name: a\n    zone: eu-west-1a\n"
        );
    }

    #[test]
    fn string_styles() {
        let v = json!({"a": "", "b": "true", "c": "123", "d": "a: b", "e": "*.example.com", "f": "x\ny\n", "g": "x\ny", "h": "tab\there", "i": "2024-01-02", "j": "1:20", "k": "plain text", "l": "it's"});
        assert_eq!(
            marshal(&v),
            "a: \"\"\nb: \"true\"\nc: \"123\"\nd: 'a: b'\ne: '*.example.com'\nf: |\n  x\n  y\ng: |-\n  x\n  y\nh: \"tab\\there\"\ni: \"2024-01-02\"\nj: \"1:20\"\nk: plain text\nl: it's\n"
        );
    }

    #[test]
    fn natural_key_order_and_wrapping() {
        let v = json!({"n10": 1, "n9": 2, "n-1": 3});
        assert_eq!(marshal(&v), "n-1: 3\nn9: 2\nn10: 1\n");
        let long = "word ".repeat(20).trim_end().to_string();
        let out = marshal(&json!({ "k": long }));
        assert_eq!(
            out,
            format!(
                "k: {}\n  word word word word\n",
                "word ".repeat(16).trim_end()
            )
        );
    }
}
