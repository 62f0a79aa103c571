//! Go's ways of turning values into text, as kops' templates see them: `fmt`'s `%v`
//! (what `{{ .x }}` prints), `printf`, `strconv.Quote`, `encoding/json` (Sprig's `toJson`)
//! and `sigs.k8s.io/yaml` (`--format-yaml`).
//!
//! Values loaded from `--values` files are `float64` in kops (YAML goes through JSON), so
//! float formatting matters: `3` prints `3`, `1000000` prints `1e+06`.

use serde_json::{Number, Value};

/// `fmt.Sprint(v)` for one operand at the top of a template action: nil is `<no value>`.
pub fn print_top(v: &Value) -> String {
    match v {
        Value::Null => "<no value>".to_string(),
        _ => sprint(v),
    }
}

/// `fmt.Sprintf("%v", v)`.
pub fn sprint(v: &Value) -> String {
    let mut s = String::new();
    write_v(&mut s, v);
    s
}

fn write_v(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_v(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_v(out, x);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push_str("map[");
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                write_v(out, &m[*k]);
            }
            out.push(']');
        }
    }
}

/// `%v` of a number: integers as they are, floats in Go's shortest `%g` form.
pub fn number_v(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    float_g(n.as_f64().unwrap_or(0.0))
}

/// Shortest round-trip digits and decimal exponent of a finite, non-zero |f|:
/// `f = 0.d1d2d3... * 10^(exp+1)`, i.e. `d1.d2d3... e exp`.
fn shortest_digits(f: f64) -> (String, i32) {
    let s = format!("{:e}", f.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0').to_string();
    let digits = if digits.is_empty() {
        "0".to_string()
    } else {
        digits
    };
    (digits, exp.parse().unwrap_or(0))
}

fn special_float(f: f64) -> Option<String> {
    if f.is_nan() {
        Some("NaN".into())
    } else if f.is_infinite() {
        Some(if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        })
    } else if f == 0.0 {
        Some(if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        })
    } else {
        None
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`.
pub fn float_g(f: f64) -> String {
    if let Some(s) = special_float(f) {
        return s;
    }
    let (digits, exp) = shortest_digits(f);
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        format!("{sign}{}", exp_form(&digits, exp))
    } else {
        format!("{sign}{}", fixed_form(&digits, exp))
    }
}

fn exp_form(digits: &str, exp: i32) -> String {
    let mut s = digits[..1].to_string();
    if digits.len() > 1 {
        s.push('.');
        s.push_str(&digits[1..]);
    }
    let (es, ea) = if exp < 0 { ('-', -exp) } else { ('+', exp) };
    format!("{s}e{es}{ea:02}")
}

fn fixed_form(digits: &str, exp: i32) -> String {
    if exp < 0 {
        format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            format!("{}{}", digits, "0".repeat(int_len - digits.len()))
        } else {
            format!("{}.{}", &digits[..int_len], &digits[int_len..])
        }
    }
}

/// Go's `encoding/json` float form: fixed unless the magnitude is tiny or huge.
fn float_json(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (digits, exp) = shortest_digits(f);
        let sign = if f < 0.0 { "-" } else { "" };
        let mut s = digits[..1].to_string();
        if digits.len() > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        let (es, ea) = if exp < 0 { ('-', -exp) } else { ('+', exp) };
        return format!("{sign}{s}e{es}{ea}");
    }
    if f == 0.0 {
        return "0".into();
    }
    let (digits, exp) = shortest_digits(f);
    let sign = if f < 0.0 { "-" } else { "" };
    format!("{sign}{}", fixed_form(&digits, exp))
}

/// `json.Marshal` (escape_html) or a `json.Encoder` with HTML escaping off (`toRawJson`);
/// `indent` gives `json.MarshalIndent(v, "", indent)`.
pub fn to_json(v: &Value, escape_html: bool, indent: Option<&str>) -> String {
    let mut out = String::new();
    write_json(&mut out, v, escape_html, indent, 0);
    out
}

fn write_json(out: &mut String, v: &Value, html: bool, indent: Option<&str>, depth: usize) {
    let newline = |out: &mut String, d: usize| {
        if let Some(ind) = indent {
            out.push('\n');
            for _ in 0..d {
                out.push_str(ind);
            }
        }
    };
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_f64() {
                out.push_str(&float_json(n.as_f64().unwrap_or(0.0)));
            } else {
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => json_string(out, s, html),
        Value::Array(a) => {
            if a.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_json(out, x, html, indent, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Value::Object(m) => {
            if m.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                json_string(out, k, html);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write_json(out, &m[*k], html, indent, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
    }
}

fn json_string(out: &mut String, s: &str, html: bool) {
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
            '<' | '>' | '&' if html => out.push_str(&format!("\\u{:04x}", c as u32)),
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Go's `strconv.Quote` (what `%q` and Sprig's `quote` produce).
pub fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32))
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `fmt.Sprint(args...)`: a space between operands when neither side is a string.
pub fn sprint_args(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 && !a.is_string() && !args[i - 1].is_string() {
            out.push(' ');
        }
        write_v(&mut out, a);
    }
    out
}

/// `fmt.Sprintln(args...)`.
pub fn sprintln_args(args: &[Value]) -> String {
    let parts: Vec<String> = args.iter().map(sprint).collect();
    format!("{}\n", parts.join(" "))
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        _ => None,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[derive(Default)]
struct Spec {
    minus: bool,
    plus: bool,
    zero: bool,
    space: bool,
    sharp: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

fn pad(s: String, spec: &Spec, numeric: bool) -> String {
    let Some(w) = spec.width else { return s };
    let len = s.chars().count();
    if len >= w {
        return s;
    }
    let fill = w - len;
    if spec.minus {
        format!("{s}{}", " ".repeat(fill))
    } else if spec.zero && numeric {
        let (sign, rest) = match s.strip_prefix('-') {
            Some(r) => ("-", r.to_string()),
            None => match s.strip_prefix('+') {
                Some(r) => ("+", r.to_string()),
                None => ("", s.clone()),
            },
        };
        format!("{sign}{}{rest}", "0".repeat(fill))
    } else {
        format!("{}{s}", " ".repeat(fill))
    }
}

fn signed(s: String, spec: &Spec) -> String {
    if s.starts_with('-') {
        s
    } else if spec.plus {
        format!("+{s}")
    } else if spec.space {
        format!(" {s}")
    } else {
        s
    }
}

fn exp_go(s: String) -> String {
    // Rust writes `1.5e3`/`1.5e-3`; Go writes `1.5e+03`/`1.5e-03`.
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{m}e{sign}{:0>2}", digits)
        }
        None => s,
    }
}

fn format_one(verb: char, spec: &Spec, arg: &Value) -> String {
    let bad = || format!("%!{verb}({}={})", type_name(arg), sprint(arg));
    match verb {
        'v' => {
            let s = if spec.sharp {
                match arg {
                    Value::String(s) => go_quote(s),
                    _ => sprint(arg),
                }
            } else {
                sprint(arg)
            };
            pad(s, spec, false)
        }
        's' => {
            let mut s = sprint(arg);
            if let Some(p) = spec.prec {
                s = s.chars().take(p).collect();
            }
            pad(s, spec, false)
        }
        'q' => match arg {
            Value::String(s) => pad(go_quote(s), spec, false),
            _ => match as_int(arg) {
                Some(i) => pad(
                    format!("'{}'", char::from_u32(i as u32).unwrap_or('\u{FFFD}')),
                    spec,
                    false,
                ),
                None => bad(),
            },
        },
        't' => match arg {
            Value::Bool(b) => pad(b.to_string(), spec, false),
            _ => bad(),
        },
        'd' => match as_int(arg) {
            Some(i) => pad(signed(i.to_string(), spec), spec, true),
            None => bad(),
        },
        'c' => match as_int(arg) {
            Some(i) => pad(
                char::from_u32(i as u32).unwrap_or('\u{FFFD}').to_string(),
                spec,
                false,
            ),
            None => bad(),
        },
        'x' | 'X' | 'o' | 'b' => {
            let s = match (arg, as_int(arg)) {
                (Value::String(s), _) if matches!(verb, 'x' | 'X') => {
                    s.bytes().map(|b| format!("{b:02x}")).collect::<String>()
                }
                (_, Some(i)) => {
                    let (neg, u) = (i < 0, i.unsigned_abs());
                    let body = match verb {
                        'x' => format!("{u:x}"),
                        'X' => format!("{u:X}"),
                        'o' => format!("{u:o}"),
                        _ => format!("{u:b}"),
                    };
                    let prefix = if spec.sharp {
                        match verb {
                            'x' => "0x",
                            'X' => "0X",
                            'o' => "0",
                            _ => "",
                        }
                    } else {
                        ""
                    };
                    format!("{}{prefix}{body}", if neg { "-" } else { "" })
                }
                _ => return bad(),
            };
            let s = if verb == 'X' { s.to_uppercase() } else { s };
            pad(s, spec, true)
        }
        'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
            let Some(f) = as_f64(arg) else { return bad() };
            let s = match verb {
                'f' | 'F' => format!("{:.*}", spec.prec.unwrap_or(6), f),
                'e' | 'E' => exp_go(format!("{:.*e}", spec.prec.unwrap_or(6), f)),
                _ => match spec.prec {
                    None => float_g(f),
                    Some(p) => {
                        let p = p.max(1);
                        let e = format!("{:.*e}", p - 1, f);
                        let exp: i32 = e
                            .split_once('e')
                            .and_then(|(_, x)| x.parse().ok())
                            .unwrap_or(0);
                        if exp < -4 || exp >= p as i32 {
                            let (m, x) = e.split_once('e').unwrap_or((&e, "0"));
                            let m = if m.contains('.') {
                                m.trim_end_matches('0').trim_end_matches('.')
                            } else {
                                m
                            };
                            exp_go(format!("{m}e{x}"))
                        } else {
                            let decimals = (p as i32 - 1 - exp).max(0) as usize;
                            let s = format!("{f:.decimals$}");
                            if s.contains('.') {
                                s.trim_end_matches('0').trim_end_matches('.').to_string()
                            } else {
                                s
                            }
                        }
                    }
                },
            };
            let s = if verb.is_uppercase() {
                s.to_uppercase()
            } else {
                s
            };
            pad(signed(s, spec), spec, true)
        }
        _ => format!("%!{verb}({}={})", type_name(arg), sprint(arg)),
    }
}

/// `fmt.Sprintf(format, args...)` for the verbs templates use.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    let mut argi = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                '0' => spec.zero = true,
                ' ' => spec.space = true,
                '#' => spec.sharp = true,
                _ => break,
            }
            chars.next();
        }
        let num =
            |chars: &mut std::iter::Peekable<std::str::Chars>, argi: &mut usize| -> Option<usize> {
                if chars.peek() == Some(&'*') {
                    chars.next();
                    let v = args.get(*argi).and_then(as_int).map(|i| i.max(0) as usize);
                    *argi += 1;
                    return v;
                }
                let mut n = String::new();
                while let Some(&d) = chars.peek() {
                    if d.is_ascii_digit() {
                        n.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                n.parse().ok()
            };
        spec.width = num(&mut chars, &mut argi);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.prec = Some(num(&mut chars, &mut argi).unwrap_or(0));
        }
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        match args.get(argi) {
            Some(a) => out.push_str(&format_one(verb, &spec, a)),
            None => out.push_str(&format!("%!{verb}(MISSING)")),
        }
        argi += 1;
    }
    if argi < args.len() {
        let extra: Vec<String> = args[argi..]
            .iter()
            .map(|a| format!("{}={}", type_name(a), sprint(a)))
            .collect();
        out.push_str(&format!("%!(EXTRA {})", extra.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_go() {
        assert_eq!(float_g(3.0), "3");
        assert_eq!(float_g(1.5), "1.5");
        assert_eq!(float_g(100000.0), "100000");
        assert_eq!(float_g(1000000.0), "1e+06");
        assert_eq!(float_g(1234567.0), "1.234567e+06");
        assert_eq!(float_g(0.0001), "0.0001");
        assert_eq!(float_g(0.00001), "1e-05");
        assert_eq!(float_g(-2.25), "-2.25");
    }

    #[test]
    fn values_print_like_go() {
        assert_eq!(sprint(&json!(["a", 1, null])), "[a 1 <nil>]");
        assert_eq!(sprint(&json!({"b": [1.5], "a": "x"})), "map[a:x b:[1.5]]");
        assert_eq!(print_top(&Value::Null), "<no value>");
    }

    #[test]
    fn json_like_go() {
        let v = json!({"b": 3.0, "a": "<x>", "c": [1e21, 0.5]});
        assert_eq!(
            to_json(&v, true, None),
            r#"{"a":"\u003cx\u003e","b":3,"c":[1e+21,0.5]}"#
        );
        assert_eq!(
            to_json(&v, false, None),
            r#"{"a":"<x>","b":3,"c":[1e+21,0.5]}"#
        );
        assert_eq!(
            to_json(&json!({"a": [1]}), true, Some("  ")),
            "{\n  \"a\": [\n    1\n  ]\n}"
        );
    }

    #[test]
    fn printf_verbs() {
        assert_eq!(sprintf("%s-%d", &[json!("a"), json!(3)]), "a-3");
        assert_eq!(
            sprintf("%05d|%-4s|%4s|", &[json!(42), json!("ab"), json!("cd")]),
            "00042|ab  |  cd|"
        );
        assert_eq!(
            sprintf(
                "%.2f %q %v %%",
                &[json!(1.005), json!("x\"y"), json!([1, 2])]
            ),
            "1.00 \"x\\\"y\" [1 2] %"
        );
        assert_eq!(
            sprintf("%x %e", &[json!(255), json!(1500.0)]),
            "ff 1.500000e+03"
        );
        assert_eq!(sprintf("%d", &[]), "%!d(MISSING)");
    }
}
