//! Google's API discovery documents (as shipped by PyPI's
//! `google-api-python-client`, installed into `.venv` by
//! `scripts/setup-venv`): which methods exist at which paths, and the
//! request schemas bodies are checked against, as Google checks them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::error::ApiError;

/// The four services, where the server mounts each document's paths and
/// the document's file name.
pub const SERVICES: [(&str, &str, &str); 4] = [
    // Compute's servicePath (`compute/v1/`) is already in its document.
    ("compute", "/", "compute.v1.json"),
    ("dns", "/", "dns.v1.json"),
    ("iam", "/iam/", "iam.v1.json"),
    (
        "cloudresourcemanager",
        "/cloudresourcemanager/",
        "cloudresourcemanager.v1.json",
    ),
];

/// Query parameters every Google API accepts.
const STANDARD_PARAMETERS: [&str; 12] = [
    "$.xgafv",
    "access_token",
    "alt",
    "callback",
    "fields",
    "key",
    "oauth_token",
    "prettyPrint",
    "quotaUser",
    "upload_protocol",
    "uploadType",
    "userIp",
];

/// Where the documents are: `$GCE_DISCOVERY_DIR`, else the
/// `googleapiclient` package in `<workspace>/.venv`.
pub fn documents_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("GCE_DISCOVERY_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let lib = crate::workspace_root().join(".venv/lib");
    std::fs::read_dir(lib).ok()?.flatten().find_map(|python| {
        let dir = python
            .path()
            .join("site-packages/googleapiclient/discovery_cache/documents");
        dir.join("compute.v1.json").is_file().then_some(dir)
    })
}

/// One segment of a method's path template.
#[derive(Debug, Clone)]
enum Segment {
    Literal(String),
    /// `{name}`, optionally followed by `:verb` in the same segment.
    Var(String, Option<String>),
}

/// One REST method of a discovery document.
#[derive(Debug, Clone)]
pub struct Method {
    /// `compute.networks.insert`.
    pub id: String,
    pub service: &'static str,
    pub http_method: String,
    segments: Vec<Segment>,
    /// The request body schema, if the method takes one.
    pub request: Option<String>,
    /// Query parameters by name (type).
    query: BTreeMap<String, Value>,
    /// The OAuth scopes any one of which lets a token call the method.
    pub scopes: Vec<String>,
}

/// A request matched to its method: the path variables by name.
#[derive(Debug, Clone)]
pub struct Matched<'a> {
    pub method: &'a Method,
    pub vars: BTreeMap<String, String>,
}

/// The loaded documents.
pub struct Discovery {
    methods: Vec<Method>,
    /// Schemas by service, then id.
    schemas: BTreeMap<&'static str, Map<String, Value>>,
}

impl Discovery {
    /// Loads the four documents from `dir`.
    pub fn load(dir: &std::path::Path) -> Result<Discovery, String> {
        let mut methods = Vec::new();
        let mut schemas = BTreeMap::new();
        for (service, mount, file) in SERVICES {
            let path = dir.join(file);
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let doc: Value =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            let service_path = doc["servicePath"].as_str().unwrap_or("");
            let prefix = format!("{mount}{service_path}");
            collect_methods(service, &prefix, &doc["resources"], &mut methods);
            schemas.insert(
                service,
                doc["schemas"].as_object().cloned().unwrap_or_default(),
            );
        }
        Ok(Discovery { methods, schemas })
    }

    /// The method `http_method path` calls; among templates that match,
    /// the one with the most literal segments.
    pub fn route(&self, http_method: &str, path: &str) -> Option<Matched<'_>> {
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        self.methods
            .iter()
            .filter(|m| m.http_method == http_method)
            .filter_map(|m| match_template(&m.segments, &parts).map(|vars| (m, vars)))
            .max_by_key(|(m, _)| {
                m.segments
                    .iter()
                    .filter(|s| !matches!(s, Segment::Var(_, None)))
                    .count()
            })
            .map(|(method, vars)| Matched { method, vars })
    }

    /// Refuses query parameters the method does not take, as Google does.
    pub fn check_query(&self, method: &Method, query: &[(String, String)]) -> Result<(), ApiError> {
        for (name, value) in query {
            if STANDARD_PARAMETERS.contains(&name.as_str()) {
                continue;
            }
            let Some(spec) = method.query.get(name) else {
                return Err(ApiError::invalid(format!(
                    "Invalid JSON payload received. Unknown name \"{name}\": Cannot bind query parameter. Field '{name}' could not be found in request message."
                )));
            };
            if spec["type"] == "integer" && value.parse::<i64>().is_err() {
                return Err(ApiError::invalid(format!(
                    "Invalid value at '{name}' (TYPE_INT32), \"{value}\""
                )));
            }
        }
        Ok(())
    }

    /// Checks a request body against the method's request schema: unknown
    /// fields, wrong types, values outside an enum, and (Compute) fields
    /// the document marks required for this method.
    pub fn check_body(&self, method: &Method, body: &Value) -> Result<(), ApiError> {
        let Some(request) = &method.request else {
            return Ok(());
        };
        let schemas = &self.schemas[method.service];
        let checker = Checker {
            schemas,
            method: &method.id,
        };
        // Compute names the body `resource` in its messages.
        let root = if method.service == "compute" {
            "resource"
        } else {
            ""
        };
        checker.check(&Value::Object(ref_schema(request)), body, root)
    }
}

impl Discovery {
    /// The request schema of method `id`.
    pub fn request_of(&self, id: &str) -> Option<&str> {
        self.methods
            .iter()
            .find(|m| m.id == id)
            .and_then(|m| m.request.as_deref())
    }

    /// Sets `kind` on `value` and on every object nested in it whose schema
    /// has one (`compute#attachedDisk`, `compute#metadata`...): Google's
    /// answers carry the kind of each message, whatever the caller sent.
    pub fn fill_kinds(&self, service: &str, schema: &str, value: &mut Value) {
        let Some(schemas) = self.schemas.get(service) else {
            return;
        };
        fill_kinds_at(schemas, &Value::Object(ref_schema(schema)), value, 0);
    }

    /// The `kind` a schema's resources carry (`compute#network`).
    pub fn kind_of(&self, service: &str, schema: &str) -> Option<String> {
        self.schemas.get(service)?.get(schema)?["properties"]["kind"]["default"]
            .as_str()
            .map(str::to_string)
    }
}

fn fill_kinds_at(schemas: &Map<String, Value>, schema: &Value, value: &mut Value, depth: usize) {
    // Schemas refer to themselves (errors, nested messages): values are
    // finite, but stop well before any real resource's depth.
    if depth > 16 {
        return;
    }
    let schema = match schema["$ref"].as_str() {
        Some(name) => schemas.get(name).unwrap_or(&Value::Null),
        None => schema,
    };
    match value {
        Value::Object(object) => {
            if let Some(kind) = schema["properties"]["kind"]["default"].as_str() {
                object
                    .entry("kind")
                    .or_insert_with(|| Value::String(kind.to_string()));
            }
            for (name, field) in object.iter_mut() {
                let spec = schema["properties"]
                    .get(name)
                    .or_else(|| schema.get("additionalProperties"));
                if let Some(spec) = spec {
                    fill_kinds_at(schemas, spec, field, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                fill_kinds_at(schemas, &schema["items"], item, depth + 1);
            }
        }
        _ => {}
    }
}

fn ref_schema(name: &str) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("$ref".into(), Value::String(name.into()));
    map
}

fn collect_methods(service: &'static str, prefix: &str, resources: &Value, out: &mut Vec<Method>) {
    let Some(resources) = resources.as_object() else {
        return;
    };
    for resource in resources.values() {
        if let Some(methods) = resource["methods"].as_object() {
            for m in methods.values() {
                let template = m["flatPath"].as_str().or(m["path"].as_str()).unwrap_or("");
                let full = format!("{prefix}{template}");
                let segments = full
                    .trim_start_matches('/')
                    .split('/')
                    .map(parse_segment)
                    .collect();
                let query = m["parameters"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, p)| p["location"] == "query")
                    .map(|(n, p)| (n.clone(), p.clone()))
                    .collect();
                out.push(Method {
                    id: m["id"].as_str().unwrap_or("").to_string(),
                    service,
                    http_method: m["httpMethod"].as_str().unwrap_or("GET").to_string(),
                    segments,
                    request: m["request"]["$ref"].as_str().map(str::to_string),
                    query,
                    scopes: m["scopes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect(),
                });
            }
        }
        collect_methods(service, prefix, &resource["resources"], out);
    }
}

fn parse_segment(text: &str) -> Segment {
    if let Some(rest) = text.strip_prefix('{') {
        if let Some((name, tail)) = rest.split_once('}') {
            let name = name.trim_start_matches('+').to_string();
            let verb = tail.strip_prefix(':').map(str::to_string);
            return Segment::Var(name, verb);
        }
    }
    Segment::Literal(text.to_string())
}

fn match_template(segments: &[Segment], parts: &[&str]) -> Option<BTreeMap<String, String>> {
    if segments.len() != parts.len() {
        return None;
    }
    let mut vars = BTreeMap::new();
    for (segment, part) in segments.iter().zip(parts) {
        match segment {
            Segment::Literal(literal) => {
                if literal != part {
                    return None;
                }
            }
            Segment::Var(name, None) => {
                if part.is_empty() || part.contains(':') {
                    return None;
                }
                vars.insert(name.clone(), super::percent_decode(part));
            }
            Segment::Var(name, Some(verb)) => {
                let value = part.strip_suffix(&format!(":{verb}"))?;
                if value.is_empty() {
                    return None;
                }
                vars.insert(name.clone(), super::percent_decode(value));
            }
        }
    }
    Some(vars)
}

struct Checker<'a> {
    schemas: &'a Map<String, Value>,
    method: &'a str,
}

impl Checker<'_> {
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        match schema["$ref"].as_str() {
            Some(name) => self.schemas.get(name).unwrap_or(&Value::Null),
            None => schema,
        }
    }

    fn check(&self, schema: &Value, value: &Value, at: &str) -> Result<(), ApiError> {
        let schema = self.resolve(schema);
        let kind = schema["type"].as_str().unwrap_or("any");
        let wrong = |type_name: &str| {
            Err(ApiError::invalid(format!(
                "Invalid value at '{at}' ({type_name}), {value}"
            )))
        };
        match kind {
            "object" => {
                let Some(object) = value.as_object() else {
                    return Err(ApiError::invalid(format!(
                        "Invalid JSON payload received. Expected an object at '{at}', got {value}."
                    )));
                };
                let properties = schema["properties"].as_object();
                for (name, field) in object {
                    let child = join(at, name);
                    if let Some(spec) = properties.and_then(|p| p.get(name)) {
                        if !field.is_null() {
                            self.check(spec, field, &child)?;
                        }
                    } else if let Some(spec) = schema.get("additionalProperties") {
                        if !field.is_null() {
                            self.check(spec, field, &child)?;
                        }
                    } else {
                        return Err(ApiError::invalid(format!(
                            "Invalid JSON payload received. Unknown name \"{name}\" at '{at}': Cannot find field."
                        )));
                    }
                }
                for (name, spec) in properties.into_iter().flatten() {
                    let required = spec["annotations"]["required"]
                        .as_array()
                        .is_some_and(|ids| ids.iter().any(|id| id == self.method));
                    if required && object.get(name).is_none_or(Value::is_null) {
                        return Err(ApiError::new(
                            400,
                            "required",
                            "INVALID_ARGUMENT",
                            format!("Required field '{}' not specified", join(at, name)),
                        ));
                    }
                }
                Ok(())
            }
            "array" => {
                let Some(items) = value.as_array() else {
                    return wrong("TYPE_LIST");
                };
                for (i, item) in items.iter().enumerate() {
                    self.check(&schema["items"], item, &format!("{at}[{i}]"))?;
                }
                Ok(())
            }
            "string" => {
                let ok = match schema["format"].as_str() {
                    // The JSON mapping of 64-bit integers: a string or a number.
                    Some("int64" | "uint64") => {
                        value.is_string() && value.as_str().unwrap().parse::<i128>().is_ok()
                            || value.is_i64()
                            || value.is_u64()
                    }
                    _ => value.is_string(),
                };
                if !ok {
                    return wrong("TYPE_STRING");
                }
                if let (Some(allowed), Some(text)) = (schema["enum"].as_array(), value.as_str()) {
                    if !allowed.iter().any(|a| a == text) {
                        return wrong("TYPE_ENUM");
                    }
                }
                Ok(())
            }
            "integer" => {
                let ok = value.is_i64()
                    || value.is_u64()
                    || value.as_str().is_some_and(|s| s.parse::<i64>().is_ok());
                if ok {
                    Ok(())
                } else {
                    wrong("TYPE_INT32")
                }
            }
            "number" => {
                if value.is_number() {
                    Ok(())
                } else {
                    wrong("TYPE_DOUBLE")
                }
            }
            "boolean" => {
                if value.is_boolean() {
                    Ok(())
                } else {
                    wrong("TYPE_BOOL")
                }
            }
            _ => Ok(()),
        }
    }
}

fn join(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_string()
    } else {
        format!("{at}.{name}")
    }
}
