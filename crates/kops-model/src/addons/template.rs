//! Addon manifests kept as data: a YAML template per addon (in the addon's
//! folder, next to its module), filled in with minijinja from a context the
//! addon's module builds from the cluster, then parsed into objects.
//!
//! The objects go through the same pipeline as every addon (kops' labels,
//! image mirrors) and are written out as kops writes them: keys sorted,
//! Go's quoting. So a template's layout, key order and quoting style do not
//! matter, only its values; write it as the upstream manifest reads best.
//!
//! Template conventions: `trim_blocks` and `lstrip_blocks` are on (a
//! `{% if %}` line leaves no blank line or indentation behind), undefined
//! variables are errors (a typo fails the addon's tests instead of
//! rendering an empty value), and `tojson` inserts any structure from the
//! spec (tolerations, resources, ...) as inline YAML.

use minijinja::{Environment, UndefinedBehavior};
use serde::Deserialize;
use serde_json::Value;

/// A template that failed to render or to parse: a bug in kops-rs (the
/// addon's tests render every template), reported with the addon's file.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("addon template `{name}`: {message}")]
    Render { name: String, message: String },
    #[error("addon template `{name}` rendered YAML that does not parse (document {document}): {message}")]
    Parse {
        name: String,
        document: usize,
        message: String,
    },
}

/// The environment every addon template renders in.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
}

/// Renders the template `source` (named `name` in errors) with `context`
/// and parses the result into its objects; empty documents are dropped.
pub fn render(name: &str, source: &str, context: &Value) -> Result<Vec<Value>, TemplateError> {
    let env = environment();
    let text = env
        .render_named_str(name, source, context)
        .map_err(|e| TemplateError::Render {
            name: name.to_string(),
            message: describe(&e),
        })?;
    parse_stream(name, &text)
}

/// The objects of a multi-document YAML stream, empty documents dropped.
fn parse_stream(name: &str, text: &str) -> Result<Vec<Value>, TemplateError> {
    let mut objects = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document).map_err(|e| TemplateError::Parse {
            name: name.to_string(),
            document: i + 1,
            message: e.to_string(),
        })?;
        if !value.is_null() {
            objects.push(value);
        }
    }
    Ok(objects)
}

/// minijinja's error with its line, on one line.
fn describe(error: &minijinja::Error) -> String {
    let mut message = error.to_string();
    if let Some(line) = error.line() {
        if !message.contains("line") {
            message.push_str(&format!(" (line {line})"));
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_parses_and_drops_empty_documents() {
        let source = "\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ name }}
data:
  {% if debug %}
  debug: \"true\"
  {% endif %}
  replicas: \"{{ replicas }}\"
---
{% if extra %}
apiVersion: v1
kind: Namespace
metadata:
  name: extra
{% endif %}
---
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  tolerations: {{ tolerations | tojson }}
";
        let context = json!({
            "name": "cm", "debug": false, "replicas": 2, "extra": false,
            "tolerations": [{"key": "a", "operator": "Exists"}],
        });
        let objects = render("test.yaml", source, &context).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0]["data"], json!({"replicas": "2"}));
        assert_eq!(
            objects[1]["spec"]["tolerations"][0],
            json!({"key": "a", "operator": "Exists"})
        );
    }

    #[test]
    fn an_undefined_variable_is_an_error_naming_the_template() {
        let error = render("x.yaml", "a: {{ missing }}\n", &json!({})).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("`x.yaml`"), "{text}");
        assert!(text.contains("undefined"), "{text}");
    }

    #[test]
    fn bad_yaml_is_reported_with_its_document() {
        let error = render("y.yaml", "a: 1\n---\n: : :\n  - [\n", &json!({})).unwrap_err();
        assert!(error.to_string().contains("document 2"), "{error}");
    }
}
