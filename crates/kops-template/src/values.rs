//! Template values the way `kops toolbox template` builds them: `--values` files parsed
//! like `sigs.k8s.io/yaml` does (YAML through JSON, so every number is a float64),
//! deep-merged in order, then `--set`/`--set-string` applied with Helm's `strvals` syntax
//! (`a.b=1,list={x,y},arr[0].name=z`).

use serde_json::{Map, Value};

use crate::gofmt;
use crate::govalue::floatify;

/// Parses YAML into JSON-shaped data as `sigs.k8s.io/yaml.Unmarshal` into `interface{}`:
/// YAML 1.1 resolution of unquoted scalars as go-yaml v2 does it (`yes`/`no`/`on`/`off`/
/// `y`/`n` are booleans, `0777` is octal, `1_000` is a number), `<<` merge keys applied,
/// keys made strings, numbers made floats.
pub fn yaml_to_json(text: &str) -> Result<Value, serde_yaml_ng::Error> {
    let seed = Loader {
        base: text.as_ptr() as usize,
        src: text.as_bytes(),
    };
    // Like go-yaml's Unmarshal, only the first document counts.
    let Some(doc) = serde_yaml_ng::Deserializer::from_str(text).next() else {
        return Ok(Value::Null);
    };
    let v = serde::de::DeserializeSeed::deserialize(seed, doc)?;
    Ok(floatify(v))
}

/// Builds JSON values from YAML events, telling unquoted scalars (which go-yaml v2
/// resolves with YAML 1.1 rules) from quoted ones by where their text sits in the input.
#[derive(Clone, Copy)]
struct Loader<'a> {
    base: usize,
    src: &'a [u8],
}

impl Loader<'_> {
    /// Whether `s`, borrowed from the input, was written without quotes.
    fn is_plain(&self, s: &str) -> bool {
        let start = (s.as_ptr() as usize).wrapping_sub(self.base);
        if start > self.src.len() {
            return false;
        }
        let before = start.checked_sub(1).and_then(|i| self.src.get(i));
        let after = self.src.get(start + s.len());
        !matches!(
            (before, after),
            (Some(b'\''), Some(b'\'')) | (Some(b'"'), Some(b'"'))
        )
    }
}

/// go-yaml v2's reading of an unquoted scalar that YAML 1.2 would leave a string.
fn resolve_plain(s: &str) -> Value {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => return Value::Bool(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => return Value::Bool(false),
        _ => {}
    }
    if !s.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '.')) {
        return Value::String(s.to_string());
    }
    let plain: String = s.chars().filter(|c| *c != '_').collect();
    let (neg, body) = match plain.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, plain.strip_prefix('+').unwrap_or(&plain)),
    };
    let int = if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()
    } else if let Some(o) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        i64::from_str_radix(o, 8).ok()
    } else if let Some(b) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        i64::from_str_radix(b, 2).ok()
    } else if body.len() > 1 && body.starts_with('0') {
        i64::from_str_radix(&body[1..], 8).ok()
    } else if !body.is_empty() && body.bytes().all(|c| c.is_ascii_digit()) {
        body.parse().ok()
    } else {
        None
    };
    if let Some(i) = int {
        return Value::from(if neg { -i } else { i });
    }
    // go-yaml's float pattern: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
    let (mant, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let mant_ok = match mant.split_once('.') {
        Some((a, b)) => {
            a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
                && !(a.is_empty() && b.is_empty())
        }
        None => !mant.is_empty() && mant.bytes().all(|c| c.is_ascii_digit()),
    };
    let exp_ok = exp.is_none_or(|e| {
        let d = e.strip_prefix(['+', '-']).unwrap_or(e);
        !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
    });
    if mant_ok && exp_ok {
        if let Ok(f) = plain.parse::<f64>() {
            if let Some(n) = serde_json::Number::from_f64(f) {
                return Value::Number(n);
            }
        }
    }
    Value::String(s.to_string())
}

impl<'de> serde::de::DeserializeSeed<'de> for Loader<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Loader<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::from(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::from(u))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Value, E> {
        if self.is_plain(s) {
            Ok(resolve_plain(s))
        } else {
            Ok(Value::String(s.to_string()))
        }
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        // Not borrowed: escapes were decoded or it is a block scalar, so it was quoted.
        Ok(Value::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut explicit = Map::new();
        let mut merged: Vec<Map<String, Value>> = Vec::new();
        while let Some(k) = map.next_key_seed(self)? {
            let v = map.next_value_seed(self)?;
            let key = match k {
                Value::String(s) => s,
                Value::Null => "null".to_string(),
                other => gofmt::sprint(&floatify(other)),
            };
            if key == "<<" {
                match v {
                    Value::Object(m) => merged.push(m),
                    Value::Array(list) => merged.extend(list.into_iter().filter_map(|x| match x {
                        Value::Object(m) => Some(m),
                        _ => None,
                    })),
                    _ => {}
                }
                continue;
            }
            explicit.insert(key, v);
        }
        // Explicit keys win over merged ones; among merged maps the first one wins.
        for m in merged {
            for (k, v) in m {
                explicit.entry(k).or_insert(v);
            }
        }
        Ok(Value::Object(explicit))
    }
}

/// Deep merge: nested maps merge, anything else from `src` replaces what `dst` had.
pub fn merge_maps(dst: &mut Map<String, Value>, src: Map<String, Value>) {
    for (k, v) in src {
        match (dst.get_mut(&k), v) {
            (Some(Value::Object(d)), Value::Object(s)) => merge_maps(d, s),
            (_, v) => {
                dst.insert(k, v);
            }
        }
    }
}

/// Applies one `--set` (typed values) or `--set-string` argument to `dest`.
pub fn parse_set(s: &str, dest: &mut Map<String, Value>, strings: bool) -> Result<(), String> {
    let mut p = SetParser {
        chars: s.chars().collect(),
        pos: 0,
        strings,
    };
    loop {
        match p.key(dest, 0)? {
            Step::More => continue,
            Step::Eof => return Ok(()),
        }
    }
}

/// Largest list index and nesting `--set` accepts (Helm's limits).
const MAX_INDEX: usize = 65536;
const MAX_NESTING: usize = 30;

enum Step {
    More,
    Eof,
}

struct SetParser {
    chars: Vec<char>,
    pos: usize,
    strings: bool,
}

impl SetParser {
    /// Reads up to one of `stop` (consumed, returned) or the end (`None`); `\` escapes.
    fn until(&mut self, stop: &[char]) -> (String, Option<char>) {
        let mut v = String::new();
        while self.pos < self.chars.len() {
            let c = self.chars[self.pos];
            self.pos += 1;
            if stop.contains(&c) {
                return (v, Some(c));
            }
            if c == '\\' {
                match self.chars.get(self.pos) {
                    Some(n) => {
                        v.push(*n);
                        self.pos += 1;
                    }
                    None => return (v, None),
                }
            } else {
                v.push(c);
            }
        }
        (v, None)
    }

    fn typed(&self, v: String) -> Value {
        if self.strings {
            return Value::String(v);
        }
        if v.eq_ignore_ascii_case("true") {
            return Value::Bool(true);
        }
        if v.eq_ignore_ascii_case("false") {
            return Value::Bool(false);
        }
        if v.eq_ignore_ascii_case("null") {
            return Value::Null;
        }
        if v == "0" {
            return Value::from(0);
        }
        if !v.is_empty() && !v.starts_with('0') {
            if let Ok(i) = v.parse::<i64>() {
                return Value::from(i);
            }
        }
        Value::String(v)
    }

    /// `{a,b,c}` if the value starts with `{`; `Ok(None)` when it is a plain value.
    fn list(&mut self) -> Result<Option<Vec<Value>>, String> {
        if self.chars.get(self.pos) != Some(&'{') {
            return Ok(None);
        }
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            match self.until(&[',', '}']) {
                (_, None) => return Err("list must terminate with '}'".into()),
                (v, Some('}')) => {
                    if self.chars.get(self.pos) == Some(&',') {
                        self.pos += 1;
                    }
                    out.push(self.typed(v));
                    return Ok(Some(out));
                }
                (v, _) => out.push(self.typed(v)),
            }
        }
    }

    /// A value after `=`: a list, or text up to the next `,`.
    fn value(&mut self) -> Result<(Value, Step), String> {
        if self.pos >= self.chars.len() {
            return Ok((Value::String(String::new()), Step::Eof));
        }
        if let Some(l) = self.list()? {
            return Ok((Value::Array(l), Step::More));
        }
        let (v, last) = self.until(&[',']);
        let step = if last.is_none() {
            Step::Eof
        } else {
            Step::More
        };
        Ok((self.typed(v), step))
    }

    fn index(&mut self) -> Result<usize, String> {
        let (v, _) = self.until(&[']']);
        let i: i64 = v
            .parse()
            .map_err(|_| format!("error parsing index: invalid index {v:?}"))?;
        if i < 0 {
            return Err(format!("negative {i} index not allowed"));
        }
        if i as usize > MAX_INDEX {
            return Err(format!(
                "index of {i} is greater than maximum supported index of {MAX_INDEX}"
            ));
        }
        Ok(i as usize)
    }

    fn key(&mut self, data: &mut Map<String, Value>, depth: usize) -> Result<Step, String> {
        let (k, last) = self.until(&['=', '[', ',', '.']);
        match last {
            None => {
                if k.is_empty() {
                    Ok(Step::Eof)
                } else {
                    Err(format!("key {k:?} has no value"))
                }
            }
            Some('[') => {
                let i = self.index()?;
                let list = match data.get(&k) {
                    Some(Value::Array(l)) => l.clone(),
                    None => Vec::new(),
                    Some(_) => return Err(format!("unable to parse key: {k:?} is not a list")),
                };
                let (list, step) = self.list_item(list, i, depth)?;
                set(data, &k, Value::Array(list));
                Ok(step)
            }
            Some('=') => {
                let (v, step) = self.value()?;
                set(data, &k, v);
                Ok(step)
            }
            Some(',') => {
                set(data, &k, Value::String(String::new()));
                Err(format!("key {k:?} has no value (cannot end with ,)"))
            }
            _ => {
                if depth + 1 > MAX_NESTING {
                    return Err(format!(
                        "value name nested level is greater than maximum supported nested level of {MAX_NESTING}"
                    ));
                }
                let mut inner = match data.get(&k) {
                    Some(Value::Object(m)) => m.clone(),
                    None => Map::new(),
                    Some(_) => return Err(format!("unable to parse key: {k:?} is not a map")),
                };
                let step = self.key(&mut inner, depth + 1)?;
                if inner.is_empty() {
                    if let Step::More = step {
                        return Err(format!("key map {k:?} has no value"));
                    }
                } else {
                    set(data, &k, Value::Object(inner));
                }
                Ok(step)
            }
        }
    }

    fn list_item(
        &mut self,
        mut list: Vec<Value>,
        i: usize,
        depth: usize,
    ) -> Result<(Vec<Value>, Step), String> {
        let (k, last) = self.until(&['[', '.', '=']);
        if !k.is_empty() {
            return Err(format!("unexpected data at end of array index: {k:?}"));
        }
        if list.len() <= i {
            list.resize(i + 1, Value::Null);
        }
        match last {
            None => Err("unexpected end of --set value".into()),
            Some('=') => {
                let (v, step) = self.value()?;
                list[i] = v;
                Ok((list, step))
            }
            Some('[') => {
                let next = self.index()?;
                let crt = match &list[i] {
                    Value::Array(l) => l.clone(),
                    _ => Vec::new(),
                };
                let (l2, step) = self.list_item(crt, next, depth)?;
                list[i] = Value::Array(l2);
                Ok((list, step))
            }
            _ => {
                let mut inner = match &list[i] {
                    Value::Object(m) => m.clone(),
                    _ => Map::new(),
                };
                let step = self.key(&mut inner, depth)?;
                list[i] = Value::Object(inner);
                Ok((list, step))
            }
        }
    }
}

fn set(data: &mut Map<String, Value>, k: &str, v: Value) {
    if !k.is_empty() {
        data.insert(k.to_string(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set_all(args: &[(&str, bool)]) -> Value {
        let mut m = Map::new();
        for (a, strings) in args {
            parse_set(a, &mut m, *strings).unwrap();
        }
        Value::Object(m)
    }

    #[test]
    fn set_syntax_matches_kops_docs() {
        // The example from kops' cluster_template.md.
        let v = set_all(&[
            ("version=1.0,foo.bar=baz", false),
            ("foo.myArray={1,2,3}", true),
            ("foo.myArray[1]=false,foo.myArray[3]=4", false),
        ]);
        assert_eq!(
            v,
            json!({"version": "1.0", "foo": {"bar": "baz", "myArray": ["1", false, "3", 4]}})
        );
    }

    #[test]
    fn set_values_are_typed() {
        let v = set_all(&[("a=true,b=null,c=0,d=012,e=42,f=x\\,y,g=", false)]);
        assert_eq!(
            v,
            json!({"a": true, "b": null, "c": 0, "d": "012", "e": 42, "f": "x,y", "g": ""})
        );
        let v = set_all(&[("list[0].name=n,list[0].size=3", false)]);
        assert_eq!(v, json!({"list": [{"name": "n", "size": 3}]}));
        let mut m = Map::new();
        assert!(parse_set("a", &mut m, false)
            .unwrap_err()
            .contains("has no value"));
    }

    #[test]
    fn yaml_1_1_scalars_like_go_yaml_v2() {
        let v = yaml_to_json("a: yes\nb: 'yes'\nc: Off\nd: 0777\ne: 1_000\nf: \"0777\"\ng: 1.30.2\nh: y\ni: 0x1F\nj: .5\nk: NO\non: 1\n").unwrap();
        assert_eq!(
            v,
            json!({"a": true, "b": "yes", "c": false, "d": 511.0, "e": 1000.0, "f": "0777", "g": "1.30.2", "h": true, "i": 31.0, "j": 0.5, "k": false, "true": 1.0})
        );
    }

    #[test]
    fn first_document_only() {
        assert_eq!(
            yaml_to_json("a: 1\n---\nb: 2\n").unwrap(),
            json!({"a": 1.0})
        );
        assert_eq!(yaml_to_json("").unwrap(), Value::Null);
    }

    #[test]
    fn merge_keys_apply() {
        let v =
            yaml_to_json("base: &b {type: m5.large, min: 1}\nig:\n  <<: *b\n  min: 2\n").unwrap();
        assert_eq!(v["ig"], json!({"type": "m5.large", "min": 2.0}));
    }

    #[test]
    fn values_are_floats_and_merge_deeply() {
        let a = yaml_to_json(
            "instanceGroups:\n  foo:\n    ami: ami-1234567\n    type: m4.large\ncount: 3\n",
        )
        .unwrap();
        let b = yaml_to_json("instanceGroups:\n  foo:\n    type: t2.large\n").unwrap();
        let (Value::Object(mut a), Value::Object(b)) = (a, b) else {
            panic!()
        };
        merge_maps(&mut a, b);
        assert_eq!(
            a["instanceGroups"]["foo"],
            json!({"ami": "ami-1234567", "type": "t2.large"})
        );
        assert!(a["count"].as_number().is_some_and(|n| n.is_f64()));
    }
}
