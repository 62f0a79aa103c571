//! The CloudFormation writer: one template, `kubernetes.json`, with a
//! resource per task (an internet gateway is two: the gateway and its VPC
//! attachment). Logical ids are the task key with everything but letters
//! and digits removed (`VPCminimalexamplecom`), deduplicated with a
//! counter; references are `Ref` / `Fn::GetAtt` so CloudFormation orders
//! the creation itself.

use std::collections::BTreeMap;

use crate::context::Tags;
use kops_engine::TaskKey;

use kops_render::{RenderError, Rendered};

/// A JSON value with ordered object keys.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn str(s: impl AsRef<str>) -> Json {
        Json::Str(s.as_ref().to_string())
    }

    pub fn strs<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I) -> Json {
        Json::Array(items.into_iter().map(Json::str).collect())
    }

    pub fn obj<'a, I: IntoIterator<Item = (&'a str, Json)>>(entries: I) -> Json {
        Json::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    /// `[{"Key": k, "Value": v}, ...]`.
    pub fn tags(tags: &Tags) -> Json {
        Json::Array(
            tags.iter()
                .map(|(k, v)| Json::obj([("Key", Json::str(k)), ("Value", Json::str(v))]))
                .collect(),
        )
    }

    pub fn from_value(value: &serde_json::Value) -> Json {
        use serde_json::Value;
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => n
                .as_i64()
                .map(Json::Int)
                .unwrap_or_else(|| Json::Str(n.to_string())),
            Value::String(s) => Json::Str(s.clone()),
            Value::Array(items) => Json::Array(items.iter().map(Json::from_value).collect()),
            Value::Object(map) => Json::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), Json::from_value(v)))
                    .collect(),
            ),
        }
    }

    pub fn to_value(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Int(i) => Value::from(*i),
            Json::Str(s) => Value::String(s.clone()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

struct Resource {
    kind: String,
    properties: Json,
    depends_on: Vec<String>,
}

/// Collects the resources of one template.
pub struct CloudFormation {
    resources: BTreeMap<String, Resource>,
    /// Task key (`kind/name`) → logical id of its main resource.
    ids: BTreeMap<String, String>,
    used: BTreeMap<String, String>,
    pending: Vec<(TaskKey, String, Json)>,
    current: Option<TaskKey>,
    parameters: BTreeMap<String, Json>,
    /// Ids of existing objects tasks only refer to (a shared VPC, an
    /// overriding security group), by task key.
    existing: BTreeMap<String, String>,
}

fn alnum(s: &str) -> String {
    s.chars().filter(char::is_ascii_alphanumeric).collect()
}

impl CloudFormation {
    pub(crate) fn new(keys: impl IntoIterator<Item = TaskKey>) -> Self {
        let mut cf = Self {
            resources: BTreeMap::new(),
            ids: BTreeMap::new(),
            used: BTreeMap::new(),
            pending: Vec::new(),
            current: None,
            parameters: BTreeMap::new(),
            existing: BTreeMap::new(),
        };
        for key in keys {
            let base = alnum(&format!("{}{}", key.kind, key.name));
            let mut id = base.clone();
            let mut n = 2;
            while cf.used.contains_key(&id) {
                id = format!("{base}{n}");
                n += 1;
            }
            cf.used.insert(id.clone(), key.to_string());
            cf.ids.insert(key.to_string(), id);
        }
        cf
    }

    /// The logical id of the task's main resource.
    pub fn logical_id(&self, key: &TaskKey) -> String {
        self.ids
            .get(&key.to_string())
            .cloned()
            .unwrap_or_else(|| alnum(&format!("{}{}", key.kind, key.name)))
    }

    /// The logical id of a second resource a task renders (`kind` is its
    /// CloudFormation type; the id gets the type's last word appended).
    pub fn logical_id_of_kind(&self, key: &TaskKey, kind: &str) -> String {
        let suffix = kind.rsplit("::").next().unwrap_or(kind);
        format!("{}{suffix}", self.logical_id(key))
    }

    /// `{"Ref": id}` of the task's main resource; the id itself for an
    /// existing object the template does not declare.
    pub fn reference(&self, key: &TaskKey) -> Result<Json, RenderError> {
        if let Some(id) = self.existing.get(&key.to_string()) {
            return Ok(Json::str(id));
        }
        Ok(Json::obj([("Ref", Json::str(self.logical_id(key)))]))
    }

    /// Records that the task `key` stands for the existing object `id`.
    pub(crate) fn set_existing(&mut self, key: &TaskKey, id: String) {
        self.existing.insert(key.to_string(), id);
    }

    /// `{"Ref": id}` of the resource of type `kind` the current task renders.
    pub fn reference_kind(&self, kind: &str) -> Json {
        let current = self.current.clone().unwrap_or_else(|| TaskKey::new("", ""));
        let id = self.logical_id(&current);
        let id = if self.resources.get(&id).is_some_and(|r| r.kind != kind) {
            self.logical_id_of_kind(&current, kind)
        } else {
            id
        };
        Json::obj([("Ref", Json::str(id))])
    }

    pub(crate) fn set_current(&mut self, key: &TaskKey) {
        self.current = Some(key.clone());
    }

    /// `{"Fn::GetAtt": [id, attribute]}`.
    pub fn attribute(&self, key: &TaskKey, attribute: &str) -> Result<Json, RenderError> {
        Ok(Json::obj([(
            "Fn::GetAtt",
            Json::Array(vec![Json::str(self.logical_id(key)), Json::str(attribute)]),
        )]))
    }

    /// Declares a template parameter (the value is given at stack creation)
    /// and returns `{"Ref": name}`.
    pub fn parameter(&mut self, name: &str, kind: &str, description: &str) -> Json {
        let id = alnum(name);
        self.parameters.insert(
            id.clone(),
            Json::obj([
                ("Type", Json::str(kind)),
                ("Description", Json::str(description)),
            ]),
        );
        Json::obj([("Ref", Json::str(id))])
    }

    /// Adds a resource for the task named `name`.
    pub fn resource(&mut self, kind: &str, name: &str, properties: Json) {
        self.resource_raw_deps(kind, name, properties, Vec::new());
    }

    /// Adds a resource with explicit `DependsOn` tasks.
    pub fn resource_with_deps(
        &mut self,
        kind: &str,
        name: &str,
        properties: Json,
        depends: &[TaskKey],
    ) -> Result<(), RenderError> {
        let deps = depends.iter().map(|k| self.logical_id(k)).collect();
        self.resource_raw_deps(kind, name, properties, deps);
        Ok(())
    }

    /// Adds a resource with explicit `DependsOn` logical ids.
    pub fn resource_raw_deps(
        &mut self,
        kind: &str,
        name: &str,
        properties: Json,
        depends_on: Vec<String>,
    ) {
        let _ = name;
        let current = self
            .current
            .clone()
            .unwrap_or_else(|| TaskKey::new("", name.to_string()));
        let mut id = self.logical_id(&current);
        if self.resources.contains_key(&id) {
            // A second resource of the same task (a gateway's attachment).
            id = self.logical_id_of_kind(&current, kind);
        }
        self.resources.insert(
            id,
            Resource {
                kind: kind.to_string(),
                properties,
                depends_on,
            },
        );
    }

    /// Appends `item` to the list property `property` of the task `key`'s
    /// resource (a rule's targets), once all resources are in.
    pub fn add_to_list(
        &mut self,
        key: &TaskKey,
        property: &str,
        item: Json,
    ) -> Result<(), RenderError> {
        self.pending.push((key.clone(), property.to_string(), item));
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<Rendered, RenderError> {
        for (key, property, item) in std::mem::take(&mut self.pending) {
            let id = self.logical_id(&key);
            let Some(resource) = self.resources.get_mut(&id) else {
                return Err(RenderError::Reference {
                    key,
                    attr: property,
                });
            };
            if let Json::Object(entries) = &mut resource.properties {
                match entries.iter_mut().find(|(k, _)| *k == property) {
                    Some((_, Json::Array(items))) => items.push(item),
                    _ => entries.push((property, Json::Array(vec![item]))),
                }
            }
        }
        let mut resources = serde_json::Map::new();
        for (id, r) in &self.resources {
            let mut body = serde_json::Map::new();
            body.insert("Type".into(), r.kind.clone().into());
            body.insert("Properties".into(), r.properties.to_value());
            if !r.depends_on.is_empty() {
                let deps: Vec<serde_json::Value> = r
                    .depends_on
                    .iter()
                    .filter(|d| self.resources.contains_key(*d))
                    .map(|d| d.clone().into())
                    .collect();
                if !deps.is_empty() {
                    body.insert("DependsOn".into(), deps.into());
                }
            }
            resources.insert(id.clone(), body.into());
        }
        let mut template = serde_json::json!({
            "AWSTemplateFormatVersion": "2010-09-09",
            "Description": "Kubernetes cluster rendered by kops-rs",
            "Resources": resources,
        });
        if !self.parameters.is_empty() {
            let parameters: serde_json::Map<String, serde_json::Value> = self
                .parameters
                .iter()
                .map(|(k, v)| (k.clone(), v.to_value()))
                .collect();
            template["Parameters"] = parameters.into();
        }
        let text = serde_json::to_string_pretty(&template).unwrap_or_default() + "\n";
        let mut files = BTreeMap::new();
        files.insert("kubernetes.json".to_string(), text.into_bytes());
        Ok(Rendered { files })
    }
}
