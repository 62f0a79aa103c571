//! Template values the way `kops toolbox template` builds them: `--values` files parsed
//! like `sigs.k8s.io/yaml` does (YAML through JSON, so every number is a float64),
//! deep-merged in order, then `--set`/`--set-string` applied with Helm's `strvals` syntax
//! (`a.b=1,list={x,y},arr[0].name=z`).

use serde_json::{Map, Value};

use crate::funcs::floatify;
use crate::gofmt;

/// Parses YAML into JSON-shaped data as `sigs.k8s.io/yaml.Unmarshal` into `interface{}`:
/// keys become strings, numbers become floats.
pub fn yaml_to_json(text: &str) -> Result<Value, serde_yaml_ng::Error> {
    let mut y: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)?;
    // go-yaml v2 applies `<<: *anchor` merge keys while decoding.
    y.apply_merge()?;
    Ok(floatify(convert(y)))
}

fn convert(y: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match y {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                serde_json::Number::from_f64(n.as_f64().unwrap_or(0.0))
                    .map_or(Value::Null, Value::Number)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(s) => Value::Array(s.into_iter().map(convert).collect()),
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let key = match convert(k) {
                    Value::String(s) => s,
                    Value::Null => "null".to_string(),
                    other => gofmt::sprint(&floatify(other)),
                };
                out.insert(key, convert(v));
            }
            Value::Object(out)
        }
        Y::Tagged(t) => convert(t.value),
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
    fn merge_keys_apply() {
        let v =
            yaml_to_json("base: &b {type: m5.large, min: 1}\nig:\n  <<: *b\n  min: 2\n").unwrap();
        assert_eq!(v["ig"], json!({"type": "m5.large", "min": 2.0}));
    }

    #[test]
    fn values_are_floats_and_merge_deeply() {
        let a = yaml_to_json(
            "instanceGroups:\n  foo:\n    ami: ami-1234567\n    type: m4.large\nn: 3\n",
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
        assert!(a["n"].as_number().is_some_and(|n| n.is_f64()));
    }
}
