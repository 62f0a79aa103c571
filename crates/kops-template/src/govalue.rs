//! How Go sees a template value: its truth (`if`, `not`, `and`, `or`,
//! Sprig's `empty`) and the float64 every JSON or YAML number becomes.
//! The base the evaluator, the functions and the values loader share.

use serde_json::{Number, Value};

/// Go's truth: false, 0, nil, and empty strings, lists and maps are false.
pub fn truth(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// JSON numbers as Go's `json.Unmarshal` into `interface{}` gives them: float64.
pub fn floatify(v: Value) -> Value {
    match v {
        Value::Number(n) if !n.is_f64() => n.as_f64().map_or(Value::Number(n), float),
        Value::Array(a) => Value::Array(a.into_iter().map(floatify).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, floatify(v))).collect()),
        other => other,
    }
}

/// A float64 as a value (`null` for NaN and the infinities, which JSON
/// cannot hold).
pub fn float(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}
