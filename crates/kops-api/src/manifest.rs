//! Reading and writing kops manifests: multi-document YAML (or JSON) holding
//! Clusters, InstanceGroups and other objects kops keeps beside them.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::instance_group::InstanceGroup;
use crate::meta::API_VERSION;

/// One object of a manifest.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    Cluster(Box<Cluster>),
    InstanceGroup(Box<InstanceGroup>),
    /// `kind: SSHCredential`: an admin SSH public key.
    SshCredential {
        name: String,
        public_key: String,
    },
    /// Any other Kubernetes object ("additional objects"), kept as given.
    Other(serde_json::Value),
}

impl Object {
    pub fn kind(&self) -> &str {
        match self {
            Object::Cluster(_) => "Cluster",
            Object::InstanceGroup(_) => "InstanceGroup",
            Object::SshCredential { .. } => "SSHCredential",
            Object::Other(v) => v.get("kind").and_then(|k| k.as_str()).unwrap_or(""),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Object::Cluster(c) => c.name(),
            Object::InstanceGroup(ig) => ig.name(),
            Object::SshCredential { name, .. } => name,
            Object::Other(v) => v
                .pointer("/metadata/name")
                .and_then(|k| k.as_str())
                .unwrap_or(""),
        }
    }
}

/// A manifest that could not be read, with where and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ManifestError {
    /// The file (or `<stdin>`) the manifest came from.
    pub source_name: String,
    /// 1-based document number within the file.
    pub document: usize,
    /// 1-based line and column, when known.
    pub location: Option<(u32, u32)>,
    /// The field path, such as `spec.minSize`.
    pub path: Option<String>,
    pub message: String,
    pub hint: Option<String>,
}

impl ManifestError {
    fn render(&self) -> String {
        let mut out = self.source_name.clone();
        if let Some((line, column)) = self.location {
            out.push_str(&format!(":{line}:{column}"));
        }
        if self.document > 1 {
            out.push_str(&format!(" (document {})", self.document));
        }
        out.push_str(": ");
        if let Some(path) = &self.path {
            out.push_str(&format!("`{path}`: "));
        }
        out.push_str(&self.message);
        if let Some(hint) = &self.hint {
            out.push_str(&format!("\nhint: {hint}"));
        }
        out
    }
}

/// Splits serde_yaml_ng's message into its path, message and location.
fn yaml_error(source_name: &str, document: usize, err: &serde_yaml_ng::Error) -> ManifestError {
    let location = err.location();
    let mut message = err.to_string();
    // serde_yaml_ng appends " at line L column C"; we print the location up front.
    if let Some(start) = message.find(" at line ") {
        let rest = &message[start..];
        let end = rest
            .find("column ")
            .map(|c| {
                c + "column ".len()
                    + rest[c + 7..]
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .count()
            })
            .unwrap_or(rest.len());
        message.replace_range(start..start + end, "");
    }
    let mut path = None;
    if let Some((p, rest)) = message.split_once(": ") {
        if !p.contains(' ') && p != "." && !p.is_empty() {
            path = Some(p.to_string());
            message = rest.to_string();
        }
    }
    let hint = if message.starts_with("invalid type") {
        Some("check the field's type against the kops API reference (numbers unquoted, lists as `- item`)".to_string())
    } else if location.is_some() && path.is_none() {
        Some("the file is not valid YAML: check indentation and quoting near that line".to_string())
    } else {
        None
    };
    ManifestError {
        source_name: source_name.to_string(),
        document,
        location: location
            .as_ref()
            .map(|l| (l.line() as u32, l.column() as u32)),
        path,
        message,
        hint,
    }
}

fn error_at(
    source_name: &str,
    document: usize,
    message: String,
    hint: Option<String>,
) -> ManifestError {
    ManifestError {
        source_name: source_name.to_string(),
        document,
        location: None,
        path: None,
        message,
        hint,
    }
}

/// Parses every document of a manifest. Empty documents are skipped.
pub fn parse_objects(source_name: &str, text: &str) -> Result<Vec<Object>, ManifestError> {
    let mut values = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = serde_yaml_ng::Value::deserialize(doc)
            .map_err(|e| yaml_error(source_name, i + 1, &e))?;
        values.push(string_keys(value));
    }
    let mut objects = Vec::new();
    for (i, value) in values.into_iter().enumerate() {
        let document = i + 1;
        if value.is_null() {
            continue;
        }
        if !value.is_mapping() {
            return Err(error_at(
                source_name,
                document,
                "expected a Kubernetes object (a mapping with `apiVersion`, `kind` and `metadata`)"
                    .into(),
                None,
            ));
        }
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("")
            .to_string();
        let api_version = value
            .get("apiVersion")
            .and_then(|k| k.as_str())
            .unwrap_or("")
            .to_string();
        let object = match kind.as_str() {
            "Cluster" | "InstanceGroup" | "SSHCredential" => {
                check_api_version(source_name, document, &kind, &api_version)?;
                match kind.as_str() {
                    "Cluster" => Object::Cluster(Box::new(typed(source_name, text, document, value)?)),
                    "InstanceGroup" => Object::InstanceGroup(Box::new(typed(source_name, text, document, value)?)),
                    _ => {
                        let name = value
                            .get("metadata")
                            .and_then(|m| m.get("name"))
                            .and_then(|n| n.as_str())
                            .unwrap_or("")
                            .to_string();
                        let public_key = value
                            .get("spec")
                            .and_then(|m| m.get("publicKey"))
                            .and_then(|n| n.as_str())
                            .unwrap_or("")
                            .to_string();
                        Object::SshCredential { name, public_key }
                    }
                }
            }
            "" => {
                return Err(error_at(
                    source_name,
                    document,
                    "the object has no `kind`".into(),
                    Some("start each document with `apiVersion: kops.k8s.io/v1alpha2` and `kind: Cluster` or `kind: InstanceGroup`".into()),
                ))
            }
            _ => {
                let json = serde_json::to_value(&value).map_err(|e| error_at(source_name, document, e.to_string(), None))?;
                Object::Other(json)
            }
        };
        objects.push(object);
    }
    Ok(objects)
}

fn check_api_version(
    source_name: &str,
    document: usize,
    kind: &str,
    api_version: &str,
) -> Result<(), ManifestError> {
    match api_version {
        API_VERSION | "kops/v1alpha2" => Ok(()),
        "" => Err(error_at(
            source_name,
            document,
            format!("the {kind} has no `apiVersion`"),
            Some(format!("add `apiVersion: {API_VERSION}`")),
        )),
        other => Err(error_at(
            source_name,
            document,
            format!("unsupported apiVersion `{other}` for kind `{kind}`"),
            Some(format!(
                "kops-rs reads `{API_VERSION}` manifests; write `apiVersion: {API_VERSION}`"
            )),
        )),
    }
}

/// Converts a document to its type; on failure re-reads the document from the
/// text so the error carries a line and column.
fn typed<T: DeserializeOwned>(
    source_name: &str,
    text: &str,
    document: usize,
    value: serde_yaml_ng::Value,
) -> Result<T, ManifestError> {
    match serde_yaml_ng::from_value::<T>(value) {
        Ok(v) => Ok(v),
        Err(first) => {
            let first = yaml_error(source_name, document, &first);
            if let Some(doc) = serde_yaml_ng::Deserializer::from_str(text).nth(document - 1) {
                if let Err(e) = T::deserialize(doc) {
                    let located = yaml_error(source_name, document, &e);
                    // The text still has its non-string keys: its first error
                    // may be one of those, which the value no longer has.
                    if located.message == first.message {
                        return Err(located);
                    }
                }
            }
            Err(first)
        }
    }
}

/// The value with every number or boolean mapping key written as a string,
/// as kops reads manifests (YAML is turned into JSON, whose keys are
/// strings): `customPriorityExpanderConfig: {100: [...]}` is a string map
/// there, so it has to be one here.
fn string_keys(value: serde_yaml_ng::Value) -> serde_yaml_ng::Value {
    use serde_yaml_ng::Value;
    match value {
        Value::Mapping(map) => Value::Mapping(
            map.into_iter()
                .map(|(k, v)| {
                    let key = match k {
                        Value::Number(n) => Value::String(n.to_string()),
                        Value::Bool(b) => Value::String(b.to_string()),
                        other => other,
                    };
                    (key, string_keys(v))
                })
                .collect(),
        ),
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(string_keys).collect()),
        Value::Tagged(tagged) => {
            let tagged = *tagged;
            Value::Tagged(Box::new(serde_yaml_ng::value::TaggedValue {
                tag: tagged.tag,
                value: string_keys(tagged.value),
            }))
        }
        other => other,
    }
}

/// Parses a manifest that must hold exactly one object of type `T` (used by
/// `edit` and the state store).
pub fn parse_one<T: DeserializeOwned>(source_name: &str, text: &str) -> Result<T, ManifestError> {
    let doc = serde_yaml_ng::Deserializer::from_str(text)
        .next()
        .ok_or_else(|| error_at(source_name, 1, "the document is empty".into(), None))?;
    let value =
        serde_yaml_ng::Value::deserialize(doc).map_err(|e| yaml_error(source_name, 1, &e))?;
    typed(source_name, text, 1, string_keys(value))
}

/// Serialises an object as kops does: keys sorted, `null`s omitted.
pub fn to_json_value<T: Serialize>(object: &T) -> serde_json::Value {
    // Serialising our own types to a JSON value cannot fail: all keys are strings.
    let value = serde_json::to_value(object).unwrap_or(serde_json::Value::Null);
    sorted(value)
}

fn sorted(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(sorted).collect())
        }
        other => other,
    }
}

/// Emits YAML as kops (Go) writes it: timestamps quoted, as Kubernetes
/// does, so YAML 1.1 readers (PyYAML, Ruby) keep them as strings, and
/// quoted strings in double quotes (`"true"`, `""`).
fn emit(value: &serde_json::Value) -> String {
    let text = serde_yaml_ng::to_string(value).unwrap_or_default();
    let mut out = String::with_capacity(text.len() + 8);
    for line in text.lines() {
        match line.split_once("creationTimestamp: ") {
            Some((indent, ts))
                if indent.trim().is_empty()
                    && !ts.starts_with(['"', '\''])
                    && ts.chars().next().is_some_and(|c| c.is_ascii_digit()) =>
            {
                out.push_str(&format!("{indent}creationTimestamp: \"{ts}\""));
            }
            _ => out.push_str(&double_quoted(line)),
        }
        out.push('\n');
    }
    out
}

/// `line` with a single-quoted scalar value (`key: 'x'`, `- 'x'`) written
/// double-quoted instead; any other line as it is.
fn double_quoted(line: &str) -> std::borrow::Cow<'_, str> {
    let (head, value) = match line.find(": '") {
        Some(i) => line.split_at(i + 2),
        None => match line.trim_start().strip_prefix("- '") {
            Some(_) => line.split_at(line.len() - line.trim_start().len() + 2),
            None => return line.into(),
        },
    };
    let Some(inner) = value
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .filter(|v| !v.is_empty() || value.len() == 2)
    else {
        return line.into();
    };
    // Inside single quotes only `''` is special; a lone quote means the
    // line is not one whole scalar (a folded one): leave it.
    let unescaped = inner.replace("''", "\u{0}");
    if unescaped.contains('\'') {
        return line.into();
    }
    let text = unescaped.replace('\u{0}', "'");
    if text.chars().any(char::is_control) || !resolves_to_non_string(&text) {
        return line.into();
    }
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!("{head}\"{escaped}\"").into()
}

/// Whether YAML 1.1 (Go's YAML library) would read `text` unquoted as
/// something other than a string: Go double-quotes those (`"true"`, `"1.0"`,
/// `""`) and single-quotes strings quoted only for their characters (`'*'`).
fn resolves_to_non_string(text: &str) -> bool {
    const WORDS: [&str; 26] = [
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false",
        "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "~", "null", "Null", "NULL",
    ];
    text.is_empty()
        || WORDS.contains(&text)
        || matches!(
            serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text),
            Ok(serde_yaml_ng::Value::Number(_)
                | serde_yaml_ng::Value::Bool(_)
                | serde_yaml_ng::Value::Null)
        )
}

/// One object as YAML.
pub fn to_yaml<T: Serialize>(object: &T) -> String {
    emit(&to_json_value(object))
}

/// Several objects as one multi-document YAML stream.
pub fn to_yaml_stream(values: &[serde_json::Value]) -> String {
    let docs: Vec<String> = values.iter().map(emit).collect();
    docs.join("\n---\n\n")
}

impl Object {
    /// The object as a sorted JSON value, ready for YAML or JSON output.
    pub fn to_json_value(&self) -> serde_json::Value {
        match self {
            Object::Cluster(c) => to_json_value(c.as_ref()),
            Object::InstanceGroup(ig) => to_json_value(ig.as_ref()),
            Object::SshCredential { name, public_key } => serde_json::json!({
                "apiVersion": API_VERSION,
                "kind": "SSHCredential",
                "metadata": {"name": name},
                "spec": {"publicKey": public_key},
            }),
            Object::Other(v) => sorted(v.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_keys_of_string_maps_are_read_as_strings() {
        let text = "apiVersion: kops.k8s.io/v1alpha2\nkind: Cluster\nmetadata:\n  name: a.example.com\nspec:\n  clusterAutoscaler:\n    expander: priority\n    customPriorityExpanderConfig:\n      100:\n      - .*spot.*\n      10: [\".*\"]\n";
        let objects = parse_objects("c.yaml", text).unwrap();
        let Object::Cluster(cluster) = &objects[0] else {
            panic!("not a cluster")
        };
        let config = &cluster.spec.cluster_autoscaler.as_ref().unwrap().extra
            ["customPriorityExpanderConfig"];
        assert_eq!(
            config,
            &serde_json::json!({"100": [".*spot.*"], "10": [".*"]})
        );
        // The state store and `edit` read the same way.
        let one: Cluster = parse_one("c.yaml", text).unwrap();
        assert_eq!(&one, cluster.as_ref());
        // Other errors still carry their line.
        let bad = text.replace("expander: priority", "enabled: [1]");
        let err = parse_objects("c.yaml", &bad).unwrap_err();
        assert_eq!(
            err.path.as_deref(),
            Some("spec.clusterAutoscaler.enabled"),
            "{err}"
        );
        assert!(err.location.is_some(), "{err}");
    }

    #[test]
    fn quoted_strings_are_double_quoted_like_go_yaml() {
        let value = serde_json::json!({
            "a": "true", "b": "", "c": ["", "it's"], "d": "plain", "e": "1.0",
            "f": "say \"hi\"", "g": "'quoted'",
        });
        let text = emit(&value);
        let back: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(back, value, "{text}");
        for line in ["a: \"true\"", "b: \"\"", "- \"\"", "d: plain", "e: \"1.0\""] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("- ''"), "{text}");
        // Quoted for their characters only: single quotes, as Go writes them.
        let special = emit(&serde_json::json!({"a": ["*"], "b": "::"}));
        assert_eq!(special, "a:\n- '*'\nb: '::'\n");
    }
}
