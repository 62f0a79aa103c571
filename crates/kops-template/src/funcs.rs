//! Template functions: Go's builtins (`not len index print printf eq lt ...`), the Sprig
//! functions kops registers (`sprig.TxtFuncMap()`), kops' own `indent`, and a few
//! Helm-style extras (`toYaml`, `fromYaml`, `required`) that kops itself lacks.
//!
//! Argument types are checked loosely: where Go would reject a `float64` for a `string`
//! parameter, the number is printed as Go prints it; a missing value (nil) for a string
//! parameter is still an error, as in Go.

use std::collections::BTreeSet;

use base64::Engine as _;
use serde_json::{Map, Value};
use sha2::Digest;

use crate::gofmt;
use crate::govalue::{float, floatify, truth};

type R = Result<Value, String>;

/// A family of template functions: the names it answers to and the
/// function that runs them.
struct Family {
    names: &'static [&'static str],
    run: fn(&str, &[Value]) -> R,
}

/// Every family, in the order they are looked up in.
const FAMILIES: &[Family] = &[
    Family {
        names: GO_BUILTINS,
        run: go_builtins,
    },
    Family {
        names: STRINGS,
        run: string_funcs,
    },
    Family {
        names: CONVERSIONS,
        run: conversions,
    },
    Family {
        names: MATH,
        run: math,
    },
    Family {
        names: DEFAULTS,
        run: defaults,
    },
    Family {
        names: LISTS,
        run: lists,
    },
    Family {
        names: DICTS,
        run: dicts,
    },
];

/// Other names of functions: Sprig's aliases (`tuple` is `list`...) and
/// its `must*` variants, which fail where the plain one would (here both
/// fail alike).
const ALIASES: &[&str] = &[
    "tuple",
    "push",
    "trimall",
    "biggest",
    "osBase",
    "osClean",
    "osDir",
    "osExt",
    "osIsAbs",
    "mustCompact",
    "mustFromJson",
    "mustToJson",
    "mustToPrettyJson",
    "mustToRawJson",
    "mustDeepCopy",
    "mustMerge",
    "mustMergeOverwrite",
    "mustAppend",
    "mustPush",
    "mustPrepend",
    "mustFirst",
    "mustRest",
    "mustLast",
    "mustInitial",
    "mustReverse",
    "mustUniq",
    "mustWithout",
    "mustHas",
    "mustSlice",
    "mustChunk",
    "mustToJson",
];

/// Every function name callable from a template (besides `include`, `and`, `or`).
fn names() -> impl Iterator<Item = &'static str> {
    FAMILIES
        .iter()
        .flat_map(|f| f.names.iter())
        .chain(ALIASES)
        .copied()
}

/// The names [`go_builtins`] answers to.
const GO_BUILTINS: &[&str] = &[
    "not", "len", "index", "print", "println", "printf", "eq", "ne", "lt", "le", "gt", "ge",
    "html", "urlquery", "js", "slice",
];

/// The names [`string_funcs`] answers to.
const STRINGS: &[&str] = &[
    "indent",
    "upper",
    "lower",
    "title",
    "untitle",
    "trim",
    "nospace",
    "initials",
    "swapcase",
    "snakecase",
    "kebabcase",
    "camelcase",
    "sha256sum",
    "b64enc",
    "b64dec",
    "base",
    "dir",
    "clean",
    "ext",
    "isAbs",
    "env",
    "expandenv",
    "trimAll",
    "trimSuffix",
    "trimPrefix",
    "contains",
    "hasPrefix",
    "hasSuffix",
    "repeat",
    "substr",
    "trunc",
    "abbrev",
    "quote",
    "squote",
    "cat",
    "nindent",
    "replace",
    "plural",
];

/// The names [`conversions`] answers to.
const CONVERSIONS: &[&str] = &[
    "toString",
    "atoi",
    "int",
    "int64",
    "float64",
    "seq",
    "split",
    "splitList",
    "splitn",
    "toStrings",
    "join",
    "sortAlpha",
    "until",
    "untilStep",
];

/// The names [`math`] answers to.
const MATH: &[&str] = &[
    "add1", "add", "mul", "sub", "div", "mod", "max", "min", "add1f", "addf", "subf", "mulf",
    "divf", "maxf", "minf", "ceil", "floor", "round",
];

/// The names [`defaults`] answers to.
const DEFAULTS: &[&str] = &[
    "default",
    "empty",
    "coalesce",
    "all",
    "any",
    "compact",
    "ternary",
    "toJson",
    "toRawJson",
    "toPrettyJson",
    "fromJson",
    "toYaml",
    "fromYaml",
    "required",
    "sha1sum",
    "adler32sum",
    "b32enc",
    "b32dec",
    "semverCompare",
    "fail",
    "deepCopy",
    "typeOf",
    "kindOf",
    "typeIs",
    "typeIsLike",
    "kindIs",
    "deepEqual",
];

/// The names [`lists`] answers to.
const LISTS: &[&str] = &[
    "list", "append", "prepend", "first", "last", "rest", "initial", "reverse", "uniq", "without",
    "has", "concat", "chunk",
];

/// The names [`dicts`] answers to.
const DICTS: &[&str] = &[
    "dict",
    "get",
    "set",
    "unset",
    "hasKey",
    "keys",
    "values",
    "pluck",
    "pick",
    "omit",
    "merge",
    "mergeOverwrite",
    "dig",
];

pub fn exists(name: &str) -> bool {
    names().any(|n| n == name)
}

fn want(name: &str, args: &[Value], n: usize) -> Result<(), String> {
    if args.len() != n {
        return Err(format!(
            "wrong number of args for {name}: want {n} got {}",
            args.len()
        ));
    }
    Ok(())
}

fn at_least(name: &str, args: &[Value], n: usize) -> Result<(), String> {
    if args.len() < n {
        return Err(format!(
            "wrong number of args for {name}: want at least {n} got {}",
            args.len()
        ));
    }
    Ok(())
}

/// A `string` parameter.
fn s(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Err("invalid value; expected string".into()),
        Value::Number(_) | Value::Bool(_) => Ok(gofmt::sprint(v)),
        other => Err(format!(
            "wrong type for value; expected string; got {}",
            type_of(other)
        )),
    }
}

/// An `int` parameter.
fn i(v: &Value) -> Result<i64, String> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .ok_or_else(|| "wrong type for value; expected int".to_string()),
        Value::Null => Err("invalid value; expected int".into()),
        other => Err(format!(
            "wrong type for value; expected int; got {}",
            type_of(other)
        )),
    }
}

/// Sprig's `strval`: strings as they are, anything else as `%v`.
fn strval(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => gofmt::sprint(other),
    }
}

/// Sprig's `toInt64` (via `cast`): lenient, 0 when it cannot convert.
fn to_i64(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n
            .as_i64()
            .unwrap_or_else(|| n.as_f64().map_or(0, |f| f as i64)),
        Value::Bool(b) => i64::from(*b),
        Value::String(s) => {
            let t = s.trim();
            let t = t.strip_suffix(".0").unwrap_or(t);
            parse_go_int(t).unwrap_or(0)
        }
        _ => 0,
    }
}

fn parse_go_int(t: &str) -> Option<i64> {
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if body.len() > 1 && body.starts_with('0') {
        i64::from_str_radix(&body[1..], 8).ok()?
    } else {
        body.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

fn type_of(v: &Value) -> &'static str {
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

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "invalid",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

/// Sprig's `empty`.
fn empty(v: &Value) -> bool {
    !truth(v)
}

/// Sprig's `strslice`: a list of strings from a list (nils dropped) or a single value.
fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a.iter().filter(|x| !x.is_null()).map(strval).collect(),
        Value::Null => Vec::new(),
        other => vec![strval(other)],
    }
}

fn list_arg(name: &str, v: &Value) -> Result<Vec<Value>, String> {
    match v {
        Value::Array(a) => Ok(a.clone()),
        other => Err(format!("Cannot {name} on type {}", type_of(other))),
    }
}

fn dict_arg(v: &Value) -> Result<Map<String, Value>, String> {
    match v {
        Value::Object(m) => Ok(m.clone()),
        Value::Null => Ok(Map::new()),
        other => Err(format!(
            "wrong type for value; expected map[string]interface {{}}; got {}",
            type_of(other)
        )),
    }
}

/// Equality the way Go compares basic values (numbers by value whatever their type).
fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Go's `eq`/`lt` family: numbers with numbers, strings with strings, bools for `eq`.
fn compare(name: &str, a: &Value, b: &Value) -> Result<std::cmp::Ordering, String> {
    use std::cmp::Ordering;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                return Ok(x.cmp(&y));
            }
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            Ok(x.partial_cmp(&y).unwrap_or(Ordering::Equal))
        }
        (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) if matches!(name, "eq" | "ne") => Ok(x.cmp(y)),
        (Value::Bool(_), Value::Bool(_)) => Err("invalid type for comparison".into()),
        (Value::Null, _) | (_, Value::Null) if matches!(name, "eq" | "ne") => {
            Ok(if a.is_null() && b.is_null() {
                Ordering::Equal
            } else {
                Ordering::Less
            })
        }
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => {
            Err("non-comparable types".into())
        }
        (Value::Null, _) | (_, Value::Null) => Err("invalid type for comparison".into()),
        _ => Err("incompatible types for comparison".into()),
    }
}

/// mergo's Merge (fill missing, `overwrite` false) / MergeWithOverwrite, deep for maps.
fn merge_into(dst: &mut Map<String, Value>, src: &Map<String, Value>, overwrite: bool) {
    for (k, sv) in src {
        match (dst.get_mut(k), sv) {
            (Some(Value::Object(dm)), Value::Object(sm)) => merge_into(dm, sm, overwrite),
            (Some(dv), _) => {
                if overwrite && !empty(sv) || empty(dv) && !overwrite {
                    *dv = sv.clone();
                }
            }
            (None, _) => {
                dst.insert(k.clone(), sv.clone());
            }
        }
    }
}

/// kops' `indent`: every line but the first, and no padding on empty lines.
fn kops_indent(n: i64, content: &str) -> String {
    let pad = " ".repeat(n.max(0) as usize);
    content
        .split('\n')
        .enumerate()
        .map(|(i, l)| {
            if i == 0 || l.is_empty() {
                l.to_string()
            } else {
                format!("{pad}{l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn go_title(s: &str) -> String {
    let mut out = String::new();
    let mut prev_sep = true;
    for c in s.chars() {
        if prev_sep {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        prev_sep = !(c.is_alphanumeric() || c == '_');
    }
    out
}

fn words_case(s: &str, sep: char) -> String {
    let mut out = String::new();
    let chars: Vec<char> = s.chars().collect();
    for (idx, &c) in chars.iter().enumerate() {
        if c == '_' || c == '-' || c.is_whitespace() {
            if !out.is_empty() && !out.ends_with(sep) {
                out.push(sep);
            }
            continue;
        }
        if c.is_uppercase() && idx > 0 {
            let prev = chars[idx - 1];
            let next_lower = chars.get(idx + 1).is_some_and(|n| n.is_lowercase());
            if (prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower))
                && !out.ends_with(sep)
            {
                out.push(sep);
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

fn camel(s: &str) -> String {
    s.split('_')
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// Go's `path.Clean`.
fn path_clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

fn path_base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

fn path_dir(p: &str) -> String {
    let dir = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    path_clean(dir)
}

fn path_ext(p: &str) -> String {
    let base = p.rsplit('/').next().unwrap_or(p);
    match base.rfind('.') {
        Some(i) => base[i..].to_string(),
        None => String::new(),
    }
}

fn expand_env(s: &str) -> String {
    let mut out = String::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            let (name, next) = if b[i + 1] == b'{' {
                match s[i + 2..].find('}') {
                    Some(e) => (&s[i + 2..i + 2 + e], i + 3 + e),
                    None => (&s[i + 1..i + 1], i + 1),
                }
            } else {
                let mut j = i + 1;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                    j += 1;
                }
                (&s[i + 1..j], j)
            };
            if next > i + 1 {
                out.push_str(&std::env::var(name).unwrap_or_default());
                i = next;
                continue;
            }
        }
        let c = s[i..].chars().next().unwrap_or('$');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

fn byte_slice(s: &str, start: usize, end: usize) -> String {
    let b = s.as_bytes();
    let (start, end) = (start.min(b.len()), end.min(b.len()));
    if start >= end {
        return String::new();
    }
    String::from_utf8_lossy(&b[start..end]).into_owned()
}

fn html_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn query_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn split_map(parts: Vec<&str>) -> Value {
    let mut m = Map::new();
    for (idx, p) in parts.into_iter().enumerate() {
        m.insert(format!("_{idx}"), Value::String(p.to_string()));
    }
    Value::Object(m)
}

fn strings(v: Vec<String>) -> Value {
    Value::Array(v.into_iter().map(Value::String).collect())
}

fn int_range(start: i64, stop: i64, step: i64) -> Vec<i64> {
    let mut v = Vec::new();
    if step == 0 {
        return v;
    }
    let mut x = start;
    while (step > 0 && x < stop) || (step < 0 && x > stop) {
        v.push(x);
        x += step;
        if v.len() > 1_000_000 {
            break;
        }
    }
    v
}

fn round_half(v: f64, places: i64, round_on: f64) -> f64 {
    let pow = 10f64.powi(places as i32);
    let digit = pow * v;
    let (int, frac) = (digit.trunc(), digit.fract());
    let r = if frac >= round_on { int + 1.0 } else { int };
    r / pow
}

/// SHA-1 (Sprig's `sha1sum`), hex encoded; small enough to keep a dependency away.
fn sha1_hex(data: &[u8]) -> String {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 80];
        for (i, word) in chunk.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

const B32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

fn base32_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(B32[((bits >> (35 - i * 5)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base32_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut bits = 0u64;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.bytes() {
        let v = B32.iter().position(|x| *x == c)? as u64;
        bits = (bits << 5) | v;
        n += 5;
        if n >= 8 {
            n -= 8;
            out.push(((bits >> n) & 0xFF) as u8);
        }
    }
    Some(out)
}

/// Calls function `name` with evaluated arguments (the piped value last).
pub fn call(name: &str, args: Vec<Value>) -> R {
    let name = match name {
        "mustCompact" | "mustFromJson" | "mustToJson" | "mustToPrettyJson" | "mustToRawJson"
        | "mustDeepCopy" | "mustMerge" | "mustMergeOverwrite" | "mustAppend" | "mustPush"
        | "mustPrepend" | "mustFirst" | "mustRest" | "mustLast" | "mustInitial" | "mustReverse"
        | "mustUniq" | "mustWithout" | "mustHas" | "mustSlice" | "mustChunk" => {
            let base = &name[4..];
            // "mustToJson" -> "toJson": lowercase the first letter of what follows "must".
            let mut c = base.chars();
            let first = c.next().map(|f| f.to_ascii_lowercase()).unwrap_or_default();
            return call(&format!("{first}{}", c.as_str()), args);
        }
        "tuple" => "list",
        "push" => "append",
        "trimall" => "trimAll",
        "biggest" => "max",
        "osBase" => "base",
        "osClean" => "clean",
        "osDir" => "dir",
        "osExt" => "ext",
        "osIsAbs" => "isAbs",
        n => n,
    };
    let a = args.as_slice();
    match FAMILIES.iter().find(|f| f.names.contains(&name)) {
        Some(family) => (family.run)(name, a),
        None => Err(format!("function {name:?} not defined")),
    }
}

/// A one-string function: its argument as a string, mapped by `f`.
fn str1(name: &str, a: &[Value], f: impl Fn(&str) -> String) -> R {
    want(name, a, 1)?;
    Ok(Value::String(f(&s(&a[0])?)))
}

/// Go's builtins (Sprig's `slice` in place of Go's).
fn go_builtins(name: &str, a: &[Value]) -> R {
    match name {
        "not" => {
            want(name, a, 1)?;
            Ok(Value::Bool(!truth(&a[0])))
        }
        "len" => {
            want(name, a, 1)?;
            match &a[0] {
                Value::String(x) => Ok(Value::from(x.len())),
                Value::Array(x) => Ok(Value::from(x.len())),
                Value::Object(x) => Ok(Value::from(x.len())),
                Value::Null => Err("len of nil pointer".into()),
                other => Err(format!("len of type {}", type_of(other))),
            }
        }
        "index" => {
            at_least(name, a, 1)?;
            let mut v = a[0].clone();
            for k in &a[1..] {
                v = match (&v, k) {
                    (Value::Object(m), _) => m.get(&strval(k)).cloned().unwrap_or(Value::Null),
                    (Value::Array(l), Value::Number(_)) => {
                        let idx = to_i64(k);
                        if idx < 0 || idx as usize >= l.len() {
                            return Err(format!("index out of range: {idx}"));
                        }
                        l[idx as usize].clone()
                    }
                    (Value::String(st), Value::Number(_)) => {
                        let idx = to_i64(k);
                        match st.as_bytes().get(idx.max(0) as usize) {
                            Some(b) if idx >= 0 => Value::from(*b),
                            _ => return Err(format!("index out of range: {idx}")),
                        }
                    }
                    (Value::Null, _) => return Err("index of untyped nil".into()),
                    (other, _) => {
                        return Err(format!("can't index item of type {}", type_of(other)))
                    }
                };
            }
            Ok(v)
        }
        "print" => Ok(Value::String(gofmt::sprint_args(a))),
        "println" => Ok(Value::String(gofmt::sprintln_args(a))),
        "printf" => {
            at_least(name, a, 1)?;
            Ok(Value::String(gofmt::sprintf(&s(&a[0])?, &a[1..])))
        }
        "eq" => {
            at_least(name, a, 2)?;
            for b in &a[1..] {
                if compare(name, &a[0], b)? == std::cmp::Ordering::Equal {
                    return Ok(Value::Bool(true));
                }
            }
            Ok(Value::Bool(false))
        }
        "ne" | "lt" | "le" | "gt" | "ge" => {
            want(name, a, 2)?;
            let o = compare(name, &a[0], &a[1])?;
            use std::cmp::Ordering::*;
            Ok(Value::Bool(match name {
                "ne" => o != Equal,
                "lt" => o == Less,
                "le" => o != Greater,
                "gt" => o == Greater,
                _ => o != Less,
            }))
        }
        "html" => Ok(Value::String(html_escape(&gofmt::sprint_args(a)))),
        "urlquery" => Ok(Value::String(query_escape(&gofmt::sprint_args(a)))),
        "js" => {
            let src = gofmt::sprint_args(a);
            let mut out = String::new();
            for c in src.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\'' => out.push_str("\\'"),
                    '"' => out.push_str("\\\""),
                    '<' => out.push_str("\\u003C"),
                    '>' => out.push_str("\\u003E"),
                    '&' => out.push_str("\\u0026"),
                    '=' => out.push_str("\\u003D"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
                    c => out.push(c),
                }
            }
            Ok(Value::String(out))
        }
        // Sprig's `slice` replaces Go's builtin of the same name.
        "slice" => {
            at_least(name, a, 1)?;
            let l = list_arg("slice", &a[0])?;
            let start = a.get(1).map_or(0, to_i64);
            let end = a.get(2).map_or(l.len() as i64, to_i64);
            if start < 0 || end < start || end as usize > l.len() {
                return Err(format!("slice bounds out of range [{start}:{end}]"));
            }
            Ok(Value::Array(l[start as usize..end as usize].to_vec()))
        }
        other => Err(format!("function {other:?} not defined")),
    }
}

/// kops' `indent` and Sprig's string functions.
fn string_funcs(name: &str, a: &[Value]) -> R {
    match name {
        "indent" => {
            want(name, a, 2)?;
            Ok(Value::String(kops_indent(i(&a[0])?, &s(&a[1])?)))
        }

        "upper" => str1(name, a, |x| x.to_uppercase()),
        "lower" => str1(name, a, |x| x.to_lowercase()),
        "title" => str1(name, a, go_title),
        "untitle" => str1(name, a, |x| {
            let mut out = String::new();
            let mut start = true;
            for c in x.chars() {
                if start {
                    out.extend(c.to_lowercase());
                } else {
                    out.push(c);
                }
                start = c.is_whitespace();
            }
            out
        }),
        "trim" => str1(name, a, |x| x.trim().to_string()),
        "nospace" => str1(name, a, |x| {
            x.chars().filter(|c| !c.is_whitespace()).collect()
        }),
        "initials" => str1(name, a, |x| {
            x.split_whitespace()
                .filter_map(|w| w.chars().next())
                .collect()
        }),
        "swapcase" => str1(name, a, |x| {
            x.chars()
                .map(|c| {
                    if c.is_uppercase() {
                        c.to_lowercase().collect::<String>()
                    } else {
                        c.to_uppercase().collect()
                    }
                })
                .collect()
        }),
        "snakecase" => str1(name, a, |x| words_case(x, '_')),
        "kebabcase" => str1(name, a, |x| words_case(x, '-')),
        "camelcase" => str1(name, a, camel),
        "sha256sum" => str1(name, a, |x| {
            let d = sha2::Sha256::digest(x.as_bytes());
            d.iter().map(|b| format!("{b:02x}")).collect()
        }),
        "b64enc" => str1(name, a, |x| {
            base64::engine::general_purpose::STANDARD.encode(x.as_bytes())
        }),
        "b64dec" => str1(name, a, |x| match base64::engine::general_purpose::STANDARD
            .decode(x.as_bytes())
        {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => e.to_string(),
        }),
        "base" => str1(name, a, path_base),
        "dir" => str1(name, a, path_dir),
        "clean" => str1(name, a, path_clean),
        "ext" => str1(name, a, path_ext),
        "isAbs" => {
            want(name, a, 1)?;
            Ok(Value::Bool(s(&a[0])?.starts_with('/')))
        }
        "env" => str1(name, a, |x| std::env::var(x).unwrap_or_default()),
        "expandenv" => str1(name, a, expand_env),
        "trimAll" | "trimSuffix" | "trimPrefix" | "contains" | "hasPrefix" | "hasSuffix" => {
            want(name, a, 2)?;
            let (x, y) = (s(&a[0])?, s(&a[1])?);
            Ok(match name {
                "trimAll" => Value::String(y.trim_matches(|c| x.contains(c)).to_string()),
                "trimSuffix" => Value::String(y.strip_suffix(x.as_str()).unwrap_or(&y).to_string()),
                "trimPrefix" => Value::String(y.strip_prefix(x.as_str()).unwrap_or(&y).to_string()),
                "contains" => Value::Bool(y.contains(&x)),
                "hasPrefix" => Value::Bool(y.starts_with(&x)),
                _ => Value::Bool(y.ends_with(&x)),
            })
        }
        "repeat" => {
            want(name, a, 2)?;
            Ok(Value::String(s(&a[1])?.repeat(i(&a[0])?.max(0) as usize)))
        }
        "substr" => {
            want(name, a, 3)?;
            let (start, end, st) = (i(&a[0])?, i(&a[1])?, s(&a[2])?);
            let len = st.len() as i64;
            Ok(Value::String(if start < 0 {
                byte_slice(&st, 0, end.max(0) as usize)
            } else if end < 0 || end > len {
                byte_slice(&st, start as usize, st.len())
            } else {
                byte_slice(&st, start as usize, end as usize)
            }))
        }
        "trunc" => {
            want(name, a, 2)?;
            let (c, st) = (i(&a[0])?, s(&a[1])?);
            let len = st.len() as i64;
            Ok(Value::String(if c >= 0 && len > c {
                byte_slice(&st, 0, c as usize)
            } else if c < 0 && len + c > 0 {
                byte_slice(&st, (len + c) as usize, st.len())
            } else {
                st
            }))
        }
        "abbrev" => {
            want(name, a, 2)?;
            let (w, st) = (i(&a[0])?, s(&a[1])?);
            Ok(Value::String(if w < 4 || st.len() as i64 <= w {
                st
            } else {
                format!("{}...", byte_slice(&st, 0, (w - 3) as usize))
            }))
        }
        "quote" | "squote" => {
            let parts: Vec<String> = a
                .iter()
                .filter(|x| !x.is_null())
                .map(|x| {
                    if name == "quote" {
                        gofmt::go_quote(&strval(x))
                    } else {
                        format!("'{}'", strval(x))
                    }
                })
                .collect();
            Ok(Value::String(parts.join(" ")))
        }
        "cat" => {
            let parts: Vec<String> = a.iter().filter(|x| !x.is_null()).map(strval).collect();
            Ok(Value::String(parts.join(" ")))
        }
        "nindent" => {
            want(name, a, 2)?;
            let pad = " ".repeat(i(&a[0])?.max(0) as usize);
            Ok(Value::String(format!(
                "\n{pad}{}",
                s(&a[1])?.replace('\n', &format!("\n{pad}"))
            )))
        }
        "replace" => {
            want(name, a, 3)?;
            Ok(Value::String(s(&a[2])?.replace(&s(&a[0])?, &s(&a[1])?)))
        }
        "plural" => {
            want(name, a, 3)?;
            Ok(if i(&a[2])? == 1 {
                a[0].clone()
            } else {
                a[1].clone()
            })
        }
        other => Err(format!("function {other:?} not defined")),
    }
}

/// Sprig's conversions: to strings and numbers, splits, joins and sequences.
fn conversions(name: &str, a: &[Value]) -> R {
    match name {
        "toString" => {
            want(name, a, 1)?;
            Ok(Value::String(strval(&a[0])))
        }
        "atoi" => {
            want(name, a, 1)?;
            Ok(Value::from(s(&a[0])?.trim().parse::<i64>().unwrap_or(0)))
        }
        "int" | "int64" => {
            want(name, a, 1)?;
            Ok(Value::from(to_i64(&a[0])))
        }
        "float64" => {
            want(name, a, 1)?;
            Ok(float(to_f64(&a[0])))
        }
        "seq" => {
            let n: Vec<i64> = a.iter().map(to_i64).collect();
            let v = match n.as_slice() {
                [end] => {
                    if *end >= 1 {
                        int_range(1, end + 1, 1)
                    } else {
                        int_range(1, end - 1, -1)
                    }
                }
                [start, end] => {
                    if start <= end {
                        int_range(*start, end + 1, 1)
                    } else {
                        int_range(*start, end - 1, -1)
                    }
                }
                [start, step, end] => {
                    if *step == 0 || (*step > 0) != (start <= end) {
                        Vec::new()
                    } else {
                        int_range(*start, if *step > 0 { end + 1 } else { end - 1 }, *step)
                    }
                }
                _ => return Err("seq takes 1 to 3 arguments".into()),
            };
            Ok(Value::String(
                v.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
            ))
        }
        "split" => {
            want(name, a, 2)?;
            let (sep, orig) = (s(&a[0])?, s(&a[1])?);
            Ok(split_map(orig.split(sep.as_str()).collect()))
        }
        "splitList" => {
            want(name, a, 2)?;
            let (sep, orig) = (s(&a[0])?, s(&a[1])?);
            Ok(strings(
                orig.split(sep.as_str()).map(str::to_string).collect(),
            ))
        }
        "splitn" => {
            want(name, a, 3)?;
            let (sep, n, orig) = (s(&a[0])?, i(&a[1])?, s(&a[2])?);
            if n == 0 {
                return Ok(Value::Object(Map::new()));
            }
            let parts: Vec<&str> = if n < 0 {
                orig.split(sep.as_str()).collect()
            } else {
                orig.splitn(n as usize, sep.as_str()).collect()
            };
            Ok(split_map(parts))
        }
        "toStrings" => {
            want(name, a, 1)?;
            Ok(strings(match &a[0] {
                Value::Array(l) => l
                    .iter()
                    .map(|x| {
                        if x.is_null() {
                            String::new()
                        } else {
                            strval(x)
                        }
                    })
                    .collect(),
                other => strslice(other),
            }))
        }
        "join" => {
            want(name, a, 2)?;
            Ok(Value::String(strslice(&a[1]).join(&s(&a[0])?)))
        }
        "sortAlpha" => {
            want(name, a, 1)?;
            let mut v = strslice(&a[0]);
            v.sort();
            Ok(strings(v))
        }
        "until" => {
            want(name, a, 1)?;
            let n = i(&a[0])?;
            let step = if n < 0 { -1 } else { 1 };
            Ok(Value::Array(
                int_range(0, n, step).into_iter().map(Value::from).collect(),
            ))
        }
        "untilStep" => {
            want(name, a, 3)?;
            let v = int_range(i(&a[0])?, i(&a[1])?, i(&a[2])?);
            Ok(Value::Array(v.into_iter().map(Value::from).collect()))
        }
        other => Err(format!("function {other:?} not defined")),
    }
}

/// Sprig's math: integer results (Sprig's int64), and the `*f` float64 ones.
fn math(name: &str, a: &[Value]) -> R {
    match name {
        "add1" => {
            want(name, a, 1)?;
            Ok(Value::from(to_i64(&a[0]) + 1))
        }
        "add" => Ok(Value::from(
            a.iter().map(to_i64).fold(0i64, i64::wrapping_add),
        )),
        "mul" => {
            at_least(name, a, 1)?;
            Ok(Value::from(
                a.iter().map(to_i64).fold(1i64, i64::wrapping_mul),
            ))
        }
        "sub" | "div" | "mod" => {
            want(name, a, 2)?;
            let (x, y) = (to_i64(&a[0]), to_i64(&a[1]));
            if name != "sub" && y == 0 {
                return Err("integer divide by zero".into());
            }
            Ok(Value::from(match name {
                "sub" => x.wrapping_sub(y),
                "div" => x / y,
                _ => x % y,
            }))
        }
        "max" | "min" => {
            at_least(name, a, 1)?;
            let it = a.iter().map(to_i64);
            Ok(Value::from(
                if name == "max" { it.max() } else { it.min() }.unwrap_or(0),
            ))
        }
        "add1f" => {
            want(name, a, 1)?;
            Ok(float(to_f64(&a[0]) + 1.0))
        }
        "addf" => Ok(float(a.iter().map(to_f64).sum())),
        "subf" | "mulf" | "divf" => {
            at_least(name, a, 1)?;
            let mut acc = to_f64(&a[0]);
            for x in &a[1..] {
                let y = to_f64(x);
                match name {
                    "subf" => acc -= y,
                    "mulf" => acc *= y,
                    _ => {
                        if y == 0.0 {
                            return Err("division by zero".into());
                        }
                        acc /= y
                    }
                }
            }
            Ok(float(acc))
        }
        "maxf" | "minf" => {
            at_least(name, a, 1)?;
            let it = a.iter().map(to_f64);
            let r = if name == "maxf" {
                it.fold(f64::MIN, f64::max)
            } else {
                it.fold(f64::MAX, f64::min)
            };
            Ok(float(r))
        }
        "ceil" | "floor" => {
            want(name, a, 1)?;
            let f = to_f64(&a[0]);
            Ok(float(if name == "ceil" { f.ceil() } else { f.floor() }))
        }
        "round" => {
            at_least(name, a, 2)?;
            let on = a.get(2).map_or(0.5, to_f64);
            Ok(float(round_half(to_f64(&a[0]), to_i64(&a[1]), on)))
        }
        other => Err(format!("function {other:?} not defined")),
    }
}

/// Sprig's defaults, encodings (JSON, YAML, hashes, base32), failures and reflection; Helm's `required`.
fn defaults(name: &str, a: &[Value]) -> R {
    match name {
        "default" => {
            at_least(name, a, 1)?;
            Ok(match a.get(1) {
                Some(g) if !empty(g) => g.clone(),
                _ => a[0].clone(),
            })
        }
        "empty" => {
            want(name, a, 1)?;
            Ok(Value::Bool(empty(&a[0])))
        }
        "coalesce" => Ok(a.iter().find(|x| !empty(x)).cloned().unwrap_or(Value::Null)),
        "all" => Ok(Value::Bool(a.iter().all(|x| !empty(x)))),
        "any" => Ok(Value::Bool(a.iter().any(|x| !empty(x)))),
        "compact" => {
            want(name, a, 1)?;
            Ok(Value::Array(
                list_arg("compact", &a[0])?
                    .into_iter()
                    .filter(|x| !empty(x))
                    .collect(),
            ))
        }
        "ternary" => {
            want(name, a, 3)?;
            match &a[2] {
                Value::Bool(b) => Ok(if *b { a[0].clone() } else { a[1].clone() }),
                other => Err(format!(
                    "wrong type for value; expected bool; got {}",
                    type_of(other)
                )),
            }
        }
        "toJson" | "toRawJson" | "toPrettyJson" => {
            want(name, a, 1)?;
            Ok(Value::String(match name {
                "toJson" => gofmt::to_json(&a[0], true, None),
                "toRawJson" => gofmt::to_json(&a[0], false, None),
                _ => gofmt::to_json(&a[0], true, Some("  ")),
            }))
        }
        "fromJson" => {
            want(name, a, 1)?;
            Ok(serde_json::from_str::<Value>(&s(&a[0])?)
                .map(floatify)
                .unwrap_or(Value::Null))
        }
        "toYaml" => {
            want(name, a, 1)?;
            let y = crate::yaml::to_yaml(&a[0])?;
            Ok(Value::String(
                y.strip_suffix('\n').unwrap_or(&y).to_string(),
            ))
        }
        "fromYaml" => {
            want(name, a, 1)?;
            let v = crate::values::yaml_to_json(&s(&a[0])?).map_err(|e| e.to_string())?;
            Ok(v)
        }
        "required" => {
            want(name, a, 2)?;
            match &a[1] {
                Value::Null => Err(s(&a[0])?),
                Value::String(x) if x.is_empty() => Err(s(&a[0])?),
                v => Ok(v.clone()),
            }
        }
        "sha1sum" => str1(name, a, |x| sha1_hex(x.as_bytes())),
        "adler32sum" => str1(name, a, |x| adler32(x.as_bytes()).to_string()),
        "b32enc" => str1(name, a, |x| base32_encode(x.as_bytes())),
        "b32dec" => str1(name, a, |x| match base32_decode(x) {
            Some(b) => String::from_utf8_lossy(&b).into_owned(),
            None => "illegal base32 data".to_string(),
        }),
        "semverCompare" => {
            want(name, a, 2)?;
            Ok(Value::Bool(crate::semver::compare(&s(&a[0])?, &s(&a[1])?)?))
        }
        "fail" => {
            want(name, a, 1)?;
            Err(s(&a[0])?)
        }
        "deepCopy" => {
            want(name, a, 1)?;
            Ok(a[0].clone())
        }
        "typeOf" => {
            want(name, a, 1)?;
            Ok(Value::String(type_of(&a[0]).to_string()))
        }
        "kindOf" => {
            want(name, a, 1)?;
            Ok(Value::String(kind_of(&a[0]).to_string()))
        }
        "typeIs" | "typeIsLike" | "kindIs" => {
            want(name, a, 2)?;
            let t = s(&a[0])?;
            let actual = if name == "kindIs" {
                kind_of(&a[1])
            } else {
                type_of(&a[1])
            };
            Ok(Value::Bool(
                actual == t
                    || (name == "typeIsLike" && t.strip_prefix('*').is_some_and(|x| x == actual)),
            ))
        }
        "deepEqual" => {
            want(name, a, 2)?;
            Ok(Value::Bool(a[0] == a[1]))
        }
        other => Err(format!("function {other:?} not defined")),
    }
}

/// Sprig's lists.
fn lists(name: &str, a: &[Value]) -> R {
    match name {
        "list" => Ok(Value::Array(a.to_vec())),
        "append" => {
            want(name, a, 2)?;
            let mut l = list_arg("push", &a[0])?;
            l.push(a[1].clone());
            Ok(Value::Array(l))
        }
        "prepend" => {
            want(name, a, 2)?;
            let mut l = list_arg("prepend", &a[0])?;
            l.insert(0, a[1].clone());
            Ok(Value::Array(l))
        }
        "first" | "last" | "rest" | "initial" | "reverse" | "uniq" => {
            want(name, a, 1)?;
            let mut l = list_arg(name, &a[0])?;
            Ok(match name {
                "first" => l.first().cloned().unwrap_or(Value::Null),
                "last" => l.last().cloned().unwrap_or(Value::Null),
                "rest" => Value::Array(l.iter().skip(1).cloned().collect()),
                "initial" => {
                    l.pop();
                    Value::Array(l)
                }
                "reverse" => {
                    l.reverse();
                    Value::Array(l)
                }
                _ => {
                    let mut out: Vec<Value> = Vec::new();
                    for x in l {
                        if !out.iter().any(|y| loose_eq(y, &x)) {
                            out.push(x);
                        }
                    }
                    Value::Array(out)
                }
            })
        }
        "without" => {
            at_least(name, a, 1)?;
            let l = list_arg("without", &a[0])?;
            Ok(Value::Array(
                l.into_iter()
                    .filter(|x| !a[1..].iter().any(|o| loose_eq(o, x)))
                    .collect(),
            ))
        }
        "has" => {
            want(name, a, 2)?;
            Ok(Value::Bool(match &a[1] {
                Value::Array(l) => l.iter().any(|x| loose_eq(x, &a[0])),
                Value::Null => false,
                other => return Err(format!("Cannot find has on type {}", type_of(other))),
            }))
        }
        "concat" => {
            let mut out = Vec::new();
            for l in a {
                out.extend(list_arg("concat", l)?);
            }
            Ok(Value::Array(out))
        }
        "chunk" => {
            want(name, a, 2)?;
            let size = i(&a[0])?.max(1) as usize;
            let l = list_arg("chunk", &a[1])?;
            Ok(Value::Array(
                l.chunks(size).map(|c| Value::Array(c.to_vec())).collect(),
            ))
        }
        other => Err(format!("function {other:?} not defined")),
    }
}

/// Sprig's dicts.
fn dicts(name: &str, a: &[Value]) -> R {
    match name {
        "dict" => {
            let mut m = Map::new();
            for pair in a.chunks(2) {
                let v = pair.get(1).cloned().unwrap_or(Value::String(String::new()));
                m.insert(strval(&pair[0]), v);
            }
            Ok(Value::Object(m))
        }
        "get" => {
            want(name, a, 2)?;
            let m = dict_arg(&a[0])?;
            Ok(m.get(&s(&a[1])?)
                .cloned()
                .unwrap_or(Value::String(String::new())))
        }
        "set" => {
            want(name, a, 3)?;
            let mut m = dict_arg(&a[0])?;
            m.insert(s(&a[1])?, a[2].clone());
            Ok(Value::Object(m))
        }
        "unset" => {
            want(name, a, 2)?;
            let mut m = dict_arg(&a[0])?;
            m.remove(&s(&a[1])?);
            Ok(Value::Object(m))
        }
        "hasKey" => {
            want(name, a, 2)?;
            Ok(Value::Bool(dict_arg(&a[0])?.contains_key(&s(&a[1])?)))
        }
        "keys" => {
            let mut out = Vec::new();
            for d in a {
                let mut k: Vec<String> = dict_arg(d)?.keys().cloned().collect();
                k.sort();
                out.extend(k);
            }
            Ok(strings(out))
        }
        "values" => {
            want(name, a, 1)?;
            let m = dict_arg(&a[0])?;
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Ok(Value::Array(
                keys.into_iter().map(|k| m[k].clone()).collect(),
            ))
        }
        "pluck" => {
            at_least(name, a, 1)?;
            let k = s(&a[0])?;
            let mut out = Vec::new();
            for d in &a[1..] {
                if let Some(v) = dict_arg(d)?.get(&k) {
                    out.push(v.clone());
                }
            }
            Ok(Value::Array(out))
        }
        "pick" | "omit" => {
            at_least(name, a, 1)?;
            let m = dict_arg(&a[0])?;
            let keys: BTreeSet<String> = a[1..].iter().map(strval).collect();
            Ok(Value::Object(
                m.into_iter()
                    .filter(|(k, _)| keys.contains(k) == (name == "pick"))
                    .collect(),
            ))
        }
        "merge" | "mergeOverwrite" => {
            at_least(name, a, 1)?;
            let mut dst = dict_arg(&a[0])?;
            for src in &a[1..] {
                merge_into(&mut dst, &dict_arg(src)?, name == "mergeOverwrite");
            }
            Ok(Value::Object(dst))
        }
        "dig" => {
            at_least(name, a, 3)?;
            let n = a.len();
            let (keys, default, dict) = (&a[..n - 2], &a[n - 2], &a[n - 1]);
            let mut cur = dict.clone();
            for k in keys {
                let k = s(k)?;
                cur = match cur {
                    Value::Object(mut m) => match m.remove(&k) {
                        Some(v) => v,
                        None => return Ok(default.clone()),
                    },
                    _ => return Ok(default.clone()),
                };
            }
            Ok(cur)
        }
        other => Err(format!("function {other:?} not defined")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(name: &str, args: Vec<Value>) -> Value {
        call(name, args).unwrap()
    }

    #[test]
    fn every_listed_name_is_implemented() {
        for n in names() {
            if let Err(e) = call(n, Vec::new()) {
                assert!(!e.contains("not defined"), "{n}: {e}");
            }
        }
    }

    #[test]
    fn strings() {
        assert_eq!(
            c("indent", vec![json!(2), json!("a\n\nb")]),
            json!("a\n\n  b")
        );
        assert_eq!(
            c("nindent", vec![json!(2), json!("a\nb")]),
            json!("\n  a\n  b")
        );
        assert_eq!(
            c("quote", vec![json!("a\"b"), json!(3.0)]),
            json!("\"a\\\"b\" \"3\"")
        );
        assert_eq!(
            c("replace", vec![json!("-"), json!("_"), json!("a-b-c")]),
            json!("a_b_c")
        );
        assert_eq!(
            c("trimSuffix", vec![json!(".com"), json!("x.com")]),
            json!("x")
        );
        assert_eq!(
            c("split", vec![json!("."), json!("a.b")]),
            json!({"_0": "a", "_1": "b"})
        );
        assert_eq!(
            c("join", vec![json!(","), json!(["a", 1, null])]),
            json!("a,1")
        );
        assert_eq!(c("b64enc", vec![json!("hi")]), json!("aGk="));
        assert_eq!(
            c("title", vec![json!("hello wide-world")]),
            json!("Hello Wide-World")
        );
        assert_eq!(
            c("snakecase", vec![json!("FirstName")]),
            json!("first_name")
        );
        assert_eq!(c("trunc", vec![json!(-3), json!("abcdef")]), json!("def"));
        assert_eq!(c("seq", vec![json!(3)]), json!("1 2 3"));
        assert_eq!(
            c("sha1sum", vec![json!("abc")]),
            json!("a9993e364706816aba3e25717850c26c9cd0d89d")
        );
        assert_eq!(
            c("adler32sum", vec![json!("Wikipedia")]),
            json!("300286872")
        );
        assert_eq!(
            c("b32enc", vec![json!("foobar")]),
            json!("MZXW6YTBOI======")
        );
        assert_eq!(
            c("b32dec", vec![json!("MZXW6YTBOI======")]),
            json!("foobar")
        );
    }

    #[test]
    fn defaults_and_dicts() {
        assert_eq!(c("default", vec![json!("d"), Value::Null]), json!("d"));
        assert_eq!(c("default", vec![json!("d"), json!("")]), json!("d"));
        assert_eq!(c("default", vec![json!("d"), json!("x")]), json!("x"));
        assert_eq!(
            c("ternary", vec![json!("y"), json!("n"), json!(false)]),
            json!("n")
        );
        assert_eq!(c("hasKey", vec![json!({"a": 1}), json!("a")]), json!(true));
        assert_eq!(
            c(
                "merge",
                vec![
                    json!({"a": {"x": 1}}),
                    json!({"a": {"x": 2, "y": 3}, "b": 4})
                ]
            ),
            json!({"a": {"x": 1, "y": 3}, "b": 4})
        );
        assert_eq!(
            c("mergeOverwrite", vec![json!({"a": 1}), json!({"a": 2})]),
            json!({"a": 2})
        );
        assert_eq!(
            c(
                "dig",
                vec![json!("a"), json!("b"), json!("def"), json!({"a": {"b": 7}})]
            ),
            json!(7)
        );
        assert_eq!(c("keys", vec![json!({"b": 1, "a": 2})]), json!(["a", "b"]));
        assert!(call("required", vec![json!("need x"), Value::Null])
            .unwrap_err()
            .contains("need x"));
    }

    #[test]
    fn comparisons() {
        assert_eq!(c("eq", vec![json!(3.0), json!(3)]), json!(true));
        assert_eq!(
            c("eq", vec![json!("a"), json!("b"), json!("a")]),
            json!(true)
        );
        assert_eq!(c("lt", vec![json!("a"), json!("b")]), json!(true));
        assert_eq!(c("eq", vec![Value::Null, json!("b")]), json!(false));
        assert!(call("lt", vec![json!("a"), json!(1)]).is_err());
        assert_eq!(c("len", vec![json!([1, 2])]), json!(2));
        assert_eq!(
            c("index", vec![json!({"a": [5, 6]}), json!("a"), json!(1)]),
            json!(6)
        );
        assert_eq!(c("add", vec![json!(1), json!(2.0), json!("3")]), json!(6));
    }
}
