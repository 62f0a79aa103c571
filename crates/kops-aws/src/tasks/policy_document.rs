//! IAM policy documents, compared by what they mean rather than how they
//! are written.
//!
//! IAM hands documents back URL-encoded and keeps whatever layout it was
//! given, while kops writes `"Action": "x"` in one place and `["x"]` in
//! another and lists actions in set order. Two documents are equal here when
//! they grant the same thing: key order, a lone string versus a one-element
//! list, the order of actions, resources, principals, condition values and of
//! the statements themselves do not matter.

use std::fmt;

use kops_engine::FieldValue;
use serde_json::{Map, Value};

/// A policy document (an inline role policy or a role's trust policy).
#[derive(Debug, Clone)]
pub struct PolicyDocument {
    value: Value,
    canonical: Value,
}

/// A document that is not JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the policy document is not valid JSON: {message}")]
pub struct PolicyDocumentError {
    pub message: String,
}

impl PolicyDocument {
    /// A document from its JSON value.
    pub fn new(value: Value) -> Self {
        let canonical = canonical_document(&value);
        PolicyDocument { value, canonical }
    }

    /// Parses a document as IAM returns it: plain JSON, or URL-encoded JSON
    /// (`GetRole`, `GetRolePolicy`).
    pub fn parse(text: &str) -> Result<Self, PolicyDocumentError> {
        let trimmed = text.trim();
        let decoded;
        let json = if trimmed.starts_with('{') {
            trimmed
        } else {
            decoded = percent_decode(trimmed);
            decoded.as_str()
        };
        serde_json::from_str(json)
            .map(Self::new)
            .map_err(|e| PolicyDocumentError {
                message: e.to_string(),
            })
    }

    /// The document as written by the builder.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The JSON sent to IAM (indented, like kops writes it).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.value).unwrap_or_else(|_| self.value.to_string())
    }

    /// The statements, however the document spells them (one object or a list).
    pub fn statements(&self) -> Vec<&Value> {
        match self.value.get("Statement") {
            Some(Value::Array(items)) => items.iter().collect(),
            Some(single @ Value::Object(_)) => vec![single],
            _ => Vec::new(),
        }
    }

    /// Every action any statement names (`"ec2:DescribeInstances"`...).
    pub fn actions(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .statements()
            .into_iter()
            .filter_map(|s| s.get("Action"))
            .flat_map(strings_of)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Every resource any statement names.
    pub fn resources(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .statements()
            .into_iter()
            .filter_map(|s| s.get("Resource"))
            .flat_map(strings_of)
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

fn strings_of(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

impl PartialEq for PolicyDocument {
    fn eq(&self, other: &Self) -> bool {
        self.canonical == other.canonical
    }
}

impl fmt::Display for PolicyDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value)
    }
}

impl FieldValue for PolicyDocument {
    fn render(&self) -> String {
        self.value.to_string()
    }
}

/// The text a scalar stands for in a set of strings.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value IAM reads as a set of strings: a string, or a list of them.
fn string_set(value: &Value) -> Value {
    let mut items: Vec<String> = match value {
        Value::Array(items) => items.iter().map(scalar_text).collect(),
        other => vec![scalar_text(other)],
    };
    items.sort();
    items.dedup();
    Value::Array(items.into_iter().map(Value::String).collect())
}

fn map_values(value: &Value, f: impl Fn(&Value) -> Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), f(v))).collect()),
        other => other.clone(),
    }
}

fn canonical_statement(statement: &Value) -> Value {
    let Value::Object(map) = statement else {
        return statement.clone();
    };
    let out: Map<String, Value> = map
        .iter()
        .map(|(key, value)| {
            let value = match key.as_str() {
                "Action" | "NotAction" | "Resource" | "NotResource" => string_set(value),
                // `"Principal": "*"` stays as it is; `{"Service": ...}` is a map of sets.
                "Principal" | "NotPrincipal" => map_values(value, string_set),
                // `{"StringEquals": {"key": value-or-values}}`.
                "Condition" => map_values(value, |op| map_values(op, string_set)),
                _ => value.clone(),
            };
            (key.clone(), value)
        })
        .collect();
    Value::Object(out)
}

fn canonical_document(document: &Value) -> Value {
    let Value::Object(map) = document else {
        return document.clone();
    };
    let out: Map<String, Value> = map
        .iter()
        .map(|(key, value)| {
            if key != "Statement" {
                return (key.clone(), value.clone());
            }
            let mut statements: Vec<Value> = match value {
                Value::Array(items) => items.iter().map(canonical_statement).collect(),
                single => vec![canonical_statement(single)],
            };
            statements.sort_by_cached_key(Value::to_string);
            statements.dedup();
            (key.clone(), Value::Array(statements))
        })
        .collect();
    Value::Object(out)
}

/// Decodes `%XX` escapes (RFC 3986, as IAM encodes documents). Invalid
/// escapes are kept as they are.
fn percent_decode(text: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(high << 4 | low);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn layout_and_order_do_not_matter() {
        let a = PolicyDocument::new(json!({
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "s3:GetObject", "Resource": ["arn:aws:s3:::b/*"]},
                {"Effect": "Allow", "Action": ["ec2:B", "ec2:A"], "Resource": "*",
                 "Condition": {"StringEquals": {"aws:ResourceTag/KubernetesCluster": "c"}}}
            ]
        }));
        let b = PolicyDocument::new(json!({
            "Statement": [
                {"Resource": "*", "Action": ["ec2:A", "ec2:B"], "Effect": "Allow",
                 "Condition": {"StringEquals": {"aws:ResourceTag/KubernetesCluster": ["c"]}}},
                {"Action": ["s3:GetObject"], "Effect": "Allow", "Resource": "arn:aws:s3:::b/*"}
            ],
            "Version": "2012-10-17"
        }));
        assert_eq!(a, b);
    }

    #[test]
    fn a_different_grant_is_a_difference() {
        let a = PolicyDocument::new(
            json!({"Statement": [{"Effect": "Allow", "Action": "a:B", "Resource": "*"}]}),
        );
        let b = PolicyDocument::new(
            json!({"Statement": [{"Effect": "Allow", "Action": "a:C", "Resource": "*"}]}),
        );
        let c = PolicyDocument::new(
            json!({"Statement": [{"Effect": "Deny", "Action": "a:B", "Resource": "*"}]}),
        );
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn url_encoded_documents_as_iam_returns_them_parse() {
        let encoded = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Principal%22%3A%7B%22Service%22%3A%22ec2.amazonaws.com%22%7D%2C%22Action%22%3A%22sts%3AAssumeRole%22%7D%5D%7D";
        let parsed = PolicyDocument::parse(encoded).unwrap();
        let expected = PolicyDocument::new(json!({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": ["ec2.amazonaws.com"]}, "Action": ["sts:AssumeRole"]}]
        }));
        assert_eq!(parsed, expected);
        assert!(PolicyDocument::parse("%7Bnot json").is_err());
    }

    #[test]
    fn actions_and_resources_are_listed() {
        let doc = PolicyDocument::new(json!({"Statement": [
            {"Effect": "Allow", "Action": ["b:X", "a:Y"], "Resource": "arn:1"},
            {"Effect": "Allow", "Action": "a:Y", "Resource": ["arn:2"]}
        ]}));
        assert_eq!(doc.actions(), ["a:Y", "b:X"]);
        assert_eq!(doc.resources(), ["arn:1", "arn:2"]);
    }
}
