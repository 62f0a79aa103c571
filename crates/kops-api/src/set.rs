//! `--set path=value` and `--unset path` on a Cluster or InstanceGroup, as kops
//! applies them (`cluster.spec.kubeProxy.enabled=false`).
//!
//! The object is edited as JSON and read back into its type, and the value's
//! type is found by asking the type: `false` becomes a boolean where the field
//! takes one, `10` a number, and a field that takes a list gets the
//! comma-separated values appended (`nodePortAccess=1.2.3.4/32,10.0.0.0/8`),
//! a map gets `KEY=VALUE` added (`cloudLabels=team=blue`). `[N]` picks a list
//! element (`[len]` appends one), `[*]` every element. Paths of kops'
//! internal API (`spec.networking.networkCIDR`, `spec.api.publicName`) are
//! accepted beside the `v1alpha2` ones.
//!
//! Fields kops-rs does not model are kept as given; their type is guessed
//! (`true`/`false`, whole numbers, well-known map and list fields, else text).

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::cluster::Cluster;
use crate::field_error::FieldError;
use crate::instance_group::InstanceGroup;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathStep {
    Field(String),
    Index(usize),
    /// `[*]`: every element of a list.
    Every,
}

/// Renders a path as kops writes it: `spec.addons[0].manifest`.
pub fn path_text(steps: &[PathStep]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            PathStep::Field(f) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(f);
            }
            PathStep::Index(i) => out.push_str(&format!("[{i}]")),
            PathStep::Every => out.push_str("[*]"),
        }
    }
    out
}

/// Parses a field path: names separated by `.` (or `/`), `[N]` and `[*]`.
pub fn parse_path(path: &str) -> Result<Vec<PathStep>, String> {
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '.' || c == '/' {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            steps.push(PathStep::Field(chars[start..i].iter().collect()));
        } else if c == '[' {
            let close = chars[i..]
                .iter()
                .position(|&c| c == ']')
                .map(|p| p + i)
                .ok_or_else(|| format!("`[` at position {} is not closed", i + 1))?;
            let inner: String = chars[i + 1..close].iter().collect();
            let inner = inner.trim();
            if inner == "*" {
                steps.push(PathStep::Every);
            } else {
                let n = inner.parse::<usize>().map_err(|_| {
                    format!("`[{inner}]` is not a list index (write `[0]`, `[1]`, ... or `[*]`)")
                })?;
                steps.push(PathStep::Index(n));
            }
            i = close + 1;
        } else {
            return Err(format!("unexpected `{c}` at position {}", i + 1));
        }
    }
    if steps.is_empty() {
        return Err("the path is empty".into());
    }
    Ok(steps)
}

/// Paths of kops' internal API that `v1alpha2` spells differently.
const INTERNAL_PATHS: &[(&str, &str)] = &[
    ("spec.api.publicName", "spec.masterPublicName"),
    ("spec.api.access", "spec.kubernetesApiAccess"),
    ("spec.api.additionalSANs", "spec.additionalSans"),
    ("spec.configStore.base", "spec.configBase"),
    ("spec.configStore.keypairs", "spec.keyStore"),
    ("spec.configStore.secrets", "spec.secretStore"),
    ("spec.networking.networkCIDR", "spec.networkCIDR"),
    (
        "spec.networking.additionalNetworkCIDRs",
        "spec.additionalNetworkCIDRs",
    ),
    ("spec.networking.networkID", "spec.networkID"),
    ("spec.networking.subnets", "spec.subnets"),
    ("spec.networking.topology.dns", "spec.topology.dns.type"),
    ("spec.networking.topology", "spec.topology"),
    (
        "spec.networking.nonMasqueradeCIDR",
        "spec.nonMasqueradeCIDR",
    ),
    ("spec.networking.podCIDR", "spec.podCIDR"),
    (
        "spec.networking.serviceClusterIPRange",
        "spec.serviceClusterIPRange",
    ),
    ("spec.networking.egressProxy", "spec.egressProxy"),
    ("spec.networking.isolateControlPlane", "spec.isolateMasters"),
    ("spec.externalDNS", "spec.externalDns"),
    (
        "spec.externalCloudControllerManager",
        "spec.cloudControllerManager",
    ),
    ("spec.controlPlaneKubelet", "spec.masterKubelet"),
    (
        "spec.cloudProvider.aws.nodeTerminationHandler",
        "spec.nodeTerminationHandler",
    ),
    (
        "spec.cloudProvider.aws.loadBalancerController",
        "spec.awsLoadBalancerController",
    ),
    ("spec.cloudProvider.aws.warmPool", "spec.warmPool"),
    (
        "spec.cloudProvider.aws.podIdentityWebhook",
        "spec.podIdentityWebhook",
    ),
    (
        "spec.cloudProvider.aws.ebsCSIDriver",
        "spec.cloudConfig.awsEBSCSIDriver",
    ),
    ("spec.cloudProvider.gce.project", "spec.project"),
];

fn to_v1alpha2(steps: Vec<PathStep>) -> Vec<PathStep> {
    for (internal, v1alpha2) in INTERNAL_PATHS {
        let from: Vec<&str> = internal.split('.').collect();
        let matches = steps.len() >= from.len()
            && from
                .iter()
                .zip(&steps)
                .all(|(want, step)| matches!(step, PathStep::Field(f) if f == want));
        if matches {
            let mut out: Vec<PathStep> = v1alpha2
                .split('.')
                .map(|s| PathStep::Field(s.to_string()))
                .collect();
            out.extend(steps[from.len()..].iter().cloned());
            return out;
        }
    }
    steps
}

/// What went wrong with one path (turned into a [`FieldError`] by the caller).
struct Problem {
    message: String,
    hint: String,
}

fn problem(message: impl Into<String>, hint: impl Into<String>) -> Problem {
    Problem {
        message: message.into(),
        hint: hint.into(),
    }
}

/// Which object a path is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cluster,
    InstanceGroup,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Cluster => "cluster.",
            Kind::InstanceGroup => "instancegroup.",
        }
    }

    fn example(self) -> &'static str {
        match self {
            Kind::Cluster => "cluster.spec.kubeProxy.enabled=false",
            Kind::InstanceGroup => "instancegroup.spec.rootVolumeSize=50",
        }
    }
}

/// Checks and normalises the path of a `--set` / `--unset` for `kind`.
fn object_path(kind: Kind, raw: &str) -> Result<Vec<PathStep>, Problem> {
    let raw = raw.trim();
    let other = match kind {
        Kind::Cluster => Kind::InstanceGroup,
        Kind::InstanceGroup => Kind::Cluster,
    };
    if raw.starts_with(other.prefix()) {
        return Err(problem(
            format!(
                "`{raw}` is a path of {}, not of this object",
                other.prefix().trim_end_matches('.')
            ),
            format!(
                "paths here start with `{}`, e.g. `{}`",
                kind.prefix(),
                kind.example()
            ),
        ));
    }
    let bare = raw.strip_prefix(kind.prefix()).unwrap_or(raw);
    let steps = parse_path(bare).map_err(|m| {
        problem(
            format!("cannot read the path `{raw}`: {m}"),
            format!("write the field path like `{}`", kind.example()),
        )
    })?;
    let top_ok = match steps.as_slice() {
        [PathStep::Field(s), _, ..] if s == "spec" => true,
        [PathStep::Field(m), PathStep::Field(l), ..]
            if m == "metadata" && (l == "labels" || l == "annotations") =>
        {
            true
        }
        _ => false,
    };
    if !top_ok {
        return Err(problem(
            format!("`{raw}` is not a field kops-rs can set"),
            format!(
                "paths name a field under `spec` (or `metadata.labels` / `metadata.annotations`), e.g. `{}`",
                kind.example()
            ),
        ));
    }
    Ok(to_v1alpha2(steps))
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a text value",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Expands `[*]` into the indexes of the lists that exist.
fn expand(root: &Value, steps: &[PathStep]) -> Vec<Vec<PathStep>> {
    fn go(
        cur: Option<&Value>,
        steps: &[PathStep],
        done: &mut Vec<PathStep>,
        out: &mut Vec<Vec<PathStep>>,
    ) {
        let Some((first, rest)) = steps.split_first() else {
            out.push(done.clone());
            return;
        };
        match first {
            PathStep::Every => {
                let len = cur.and_then(Value::as_array).map_or(0, Vec::len);
                for i in 0..len {
                    done.push(PathStep::Index(i));
                    go(cur.and_then(|c| c.get(i)), rest, done, out);
                    done.pop();
                }
            }
            PathStep::Field(f) => {
                done.push(first.clone());
                go(cur.and_then(|c| c.get(f)), rest, done, out);
                done.pop();
            }
            PathStep::Index(i) => {
                done.push(first.clone());
                go(cur.and_then(|c| c.get(*i)), rest, done, out);
                done.pop();
            }
        }
    }
    let mut out = Vec::new();
    go(Some(root), steps, &mut Vec::new(), &mut out);
    out
}

fn read_at<'a>(root: &'a Value, steps: &[PathStep]) -> Option<&'a Value> {
    let mut cur = root;
    for step in steps {
        cur = match step {
            PathStep::Field(f) => cur.get(f)?,
            PathStep::Index(i) => cur.get(*i)?,
            PathStep::Every => return None,
        };
    }
    Some(cur)
}

/// Writes `new` at `steps`, creating the objects and lists on the way.
fn write_at(root: &mut Value, steps: &[PathStep], new: Value) -> Result<(), Problem> {
    let mut cur = root;
    for (n, step) in steps.iter().enumerate() {
        let here = path_text(&steps[..n]);
        cur = match step {
            PathStep::Field(f) => {
                if cur.is_null() {
                    *cur = Value::Object(Map::new());
                }
                let kind = describe(cur);
                match cur.as_object_mut() {
                    Some(map) => map.entry(f.clone()).or_insert(Value::Null),
                    None => {
                        return Err(problem(
                            format!("`{here}` holds {kind}, so it has no field `{f}`"),
                            if kind == "a list" {
                                format!("pick an element with `{here}[0]`, or all of them with `{here}[*]`")
                            } else {
                                format!("set `{here}` itself")
                            },
                        ))
                    }
                }
            }
            PathStep::Index(i) => {
                if cur.is_null() {
                    *cur = Value::Array(Vec::new());
                }
                let kind = describe(cur);
                let Some(list) = cur.as_array_mut() else {
                    return Err(problem(
                        format!("`{here}` holds {kind}, not a list, so `[{i}]` does not apply"),
                        format!("drop the index and set `{here}` itself"),
                    ));
                };
                let len = list.len();
                if *i > len {
                    return Err(problem(
                        format!("`{here}` has {len} element(s), so `[{i}]` is out of range"),
                        if len == 0 {
                            "the list is empty: add its first element with `[0]`".to_string()
                        } else {
                            format!(
                                "change an element with `[0]`..`[{}]` or add one with `[{len}]`",
                                len - 1
                            )
                        },
                    ));
                }
                if *i == len {
                    list.push(Value::Null);
                }
                &mut list[*i]
            }
            PathStep::Every => {
                return Err(problem(
                    "`[*]` matched no list element",
                    "set an element with `[0]`",
                ));
            }
        };
    }
    *cur = new;
    Ok(())
}

fn remove_at(root: &mut Value, steps: &[PathStep]) -> Result<(), Problem> {
    let Some((last, parents)) = steps.split_last() else {
        return Ok(());
    };
    let mut cur = root;
    for (n, step) in parents.iter().enumerate() {
        let present = match step {
            PathStep::Field(f) => cur.get(f).is_some(),
            PathStep::Index(i) => cur.get(*i).is_some(),
            PathStep::Every => false,
        };
        if !present {
            let container_fits = matches!(
                (step, &*cur),
                (PathStep::Field(_), Value::Object(_))
                    | (PathStep::Index(_), Value::Array(_))
                    | (_, Value::Null)
            );
            if container_fits {
                return Ok(());
            }
            let here = path_text(&steps[..n]);
            return Err(problem(
                format!(
                    "`{here}` holds {}, so `{}` is not a field",
                    describe(cur),
                    path_text(steps)
                ),
                format!("unset `{here}` itself"),
            ));
        }
        cur = match step {
            PathStep::Field(f) => &mut cur[f.as_str()],
            PathStep::Index(i) => &mut cur[*i],
            PathStep::Every => return Ok(()),
        };
    }
    match (last, cur) {
        (PathStep::Field(f), Value::Object(map)) => {
            map.remove(f);
        }
        (PathStep::Index(i), Value::Array(list)) => {
            if *i < list.len() {
                list.remove(*i);
            }
        }
        (_, Value::Null) => {}
        (_, other) => {
            let here = path_text(parents);
            return Err(problem(
                format!(
                    "`{here}` holds {}, so `{}` is not a field",
                    describe(other),
                    path_text(steps)
                ),
                format!("unset `{here}` itself"),
            ));
        }
    }
    Ok(())
}

/// `strconv.ParseBool`'s spellings.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn parse_int(s: &str) -> Option<Value> {
    if let Ok(i) = s.parse::<i64>() {
        return Some(i.into());
    }
    s.parse::<u64>().ok().map(Into::into)
}

fn parse_float(s: &str) -> Option<Value> {
    let f = s.parse::<f64>().ok().filter(|f| f.is_finite())?;
    serde_json::Number::from_f64(f).map(Value::Number)
}

/// Values that no modelled field accepts: if the object still reads back
/// with this at the path, the field is one kops-rs keeps untyped.
fn sentinel() -> Value {
    json!([null, [true], {"": 1.5}])
}

fn list_with(existing: Option<&Value>, items: Vec<Value>) -> Value {
    let mut list = existing
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    list.extend(items);
    Value::Array(list)
}

fn map_with(existing: Option<&Value>, key: &str, value: Value) -> Value {
    let mut map = existing
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    map.insert(key.to_string(), value);
    Value::Object(map)
}

/// The values to try, most specific first, for a field whose type is known.
fn typed_candidates(raw: &str, existing: Option<&Value>, list_element: bool) -> Vec<Value> {
    let mut out = Vec::new();
    if raw.is_empty() {
        out.push(Value::Object(Map::new()));
    }
    if let Some(b) = parse_bool(raw) {
        out.push(b.into());
    }
    let int = parse_int(raw);
    out.extend(int.clone());
    if int.is_none() {
        out.extend(parse_float(raw));
    }
    out.push(raw.into());
    if list_element {
        return out;
    }
    let items: Vec<&str> = raw.split(',').collect();
    out.push(list_with(
        existing,
        items.iter().map(|s| Value::from(*s)).collect(),
    ));
    if let Some(ints) = items
        .iter()
        .map(|s| parse_int(s))
        .collect::<Option<Vec<_>>>()
    {
        out.push(list_with(existing, ints));
    }
    if let Some(bools) = items
        .iter()
        .map(|s| parse_bool(s).map(Value::from))
        .collect::<Option<Vec<_>>>()
    {
        out.push(list_with(existing, bools));
    }
    let env: Vec<Value> = items
        .iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) => json!({"name": k, "value": v}),
            None => json!({"name": s}),
        })
        .collect();
    out.push(list_with(existing, env));
    if let Some((k, v)) = raw.split_once('=') {
        out.push(map_with(existing, k, v.into()));
        out.push(map_with(
            existing,
            k,
            Value::Array(v.split(',').map(Value::from).collect()),
        ));
        if let Some(i) = parse_int(v) {
            out.push(map_with(existing, k, i));
        }
    }
    out
}

/// Fields kops declares as `map[string]string` that kops-rs may not model.
const MAP_FIELDS: &[&str] = &[
    "featureGates",
    "runtimeConfig",
    "labels",
    "annotations",
    "nodeLabels",
    "cloudLabels",
    "podAnnotations",
    "agentPodAnnotations",
    "operatorPodAnnotations",
    "kubeReserved",
    "systemReserved",
    "nodeSelector",
    "providerExtraConfig",
];

/// Fields kops declares as `[]string` that kops-rs may not model.
const LIST_FIELDS: &[&str] = &[
    "admissionControl",
    "enableAdmissionPlugins",
    "disableAdmissionPlugins",
    "tlsCipherSuites",
    "apiAudiences",
    "serviceAccountKeyFile",
    "additionalSans",
    "additionalSANs",
    "etcdServers",
    "etcdServersOverrides",
    "allowedUnsafeSysctls",
    "packages",
    "suspendProcesses",
    "taints",
    "sysctlParameters",
];

/// The guessed value for a field kops-rs does not model.
fn guessed_value(raw: &str, existing: Option<&Value>, field: Option<&str>) -> Value {
    let scalar = |s: &str| -> Value {
        match s {
            "true" => true.into(),
            "false" => false.into(),
            _ => {
                let digits = s.strip_prefix('-').unwrap_or(s);
                let plain_int = !digits.is_empty()
                    && digits.bytes().all(|b| b.is_ascii_digit())
                    && (digits == "0" || !digits.starts_with('0'));
                match (plain_int, parse_int(s)) {
                    (true, Some(i)) => i,
                    _ => s.into(),
                }
            }
        }
    };
    let items = || raw.split(',').map(Value::from).collect::<Vec<_>>();
    match existing {
        Some(Value::Array(list)) => {
            let strings = list.iter().all(Value::is_string);
            let new: Vec<Value> = if strings {
                items()
            } else {
                raw.split(',').map(scalar).collect()
            };
            return list_with(existing, new);
        }
        Some(Value::Object(_)) => {
            let (k, v) = raw.split_once('=').unwrap_or((raw, ""));
            return map_with(existing, k, v.into());
        }
        _ => {}
    }
    match field {
        Some(f) if MAP_FIELDS.contains(&f) && raw.contains('=') => {
            let (k, v) = raw.split_once('=').unwrap_or((raw, ""));
            map_with(None, k, v.into())
        }
        Some(f) if LIST_FIELDS.contains(&f) => Value::Array(items()),
        _ => scalar(raw),
    }
}

fn read_back<T: DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize::<_, T>(value.clone()).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path.is_empty() || path == "." {
            inner
        } else {
            format!("{path}: {inner}")
        }
    })
}

fn type_hint(error: &str) -> &'static str {
    if error.contains("expected a boolean") {
        "the field takes `true` or `false`"
    } else if error.contains("expected i")
        || error.contains("expected u")
        || error.contains("integer")
    {
        "the field takes a whole number"
    } else if error.contains("expected f") || error.contains("number") {
        "the field takes a number"
    } else if error.contains("expected a sequence") {
        "the field takes a list: give comma-separated values"
    } else if error.contains("expected a map") {
        "the field takes KEY=VALUE entries"
    } else if error.contains("expected a string") {
        "the field takes a text value, not an object or list"
    } else if error.contains("expected struct") {
        "the field is an object: set one of its fields, e.g. `path.field=value`"
    } else {
        "check the field's type in the kops API reference"
    }
}

/// Sets one field of `object`; `path` is already checked and normalised.
fn set_value<T: Serialize + DeserializeOwned>(
    object: &mut T,
    steps: &[PathStep],
    raw: &str,
) -> Result<(), Problem> {
    let mut root = serde_json::to_value(&*object)
        .map_err(|e| problem(e.to_string(), "report this as a bug"))?;
    let shown = path_text(steps);
    let targets = if steps.contains(&PathStep::Every) {
        let t = expand(&root, steps);
        if t.is_empty() {
            let upto = steps
                .iter()
                .position(|s| *s == PathStep::Every)
                .unwrap_or(0);
            return Err(problem(
                format!(
                    "`{shown}` matches nothing: `{}` has no elements",
                    path_text(&steps[..upto])
                ),
                "`[*]` only changes elements that exist; add one with `[0]`",
            ));
        }
        t
    } else {
        vec![steps.to_vec()]
    };
    for target in targets {
        let existing = read_at(&root, &target).cloned();
        let list_element = matches!(target.last(), Some(PathStep::Index(_)));
        let field = match target.last() {
            Some(PathStep::Field(f)) => Some(f.as_str()),
            _ => None,
        };

        let mut probe = root.clone();
        write_at(&mut probe, &target, sentinel())?;
        let untyped = read_back::<T>(&probe).is_ok();

        let candidates = if untyped {
            vec![guessed_value(raw, existing.as_ref(), field)]
        } else {
            typed_candidates(raw, existing.as_ref(), list_element)
        };
        let mut chosen = None;
        let mut first_error = None;
        for candidate in candidates {
            let mut attempt = root.clone();
            write_at(&mut attempt, &target, candidate.clone())?;
            match read_back::<T>(&attempt) {
                Ok(_) => {
                    chosen = Some(attempt);
                    break;
                }
                Err(e) => {
                    if first_error.is_none() || candidate.is_string() {
                        first_error = Some(e);
                    }
                }
            }
        }
        match chosen {
            Some(v) => root = v,
            None => {
                let mut error: String = first_error.unwrap_or_default();
                // The path is already in the message.
                let prefix = format!("{}: ", path_text(&target));
                if let Some(rest) = error.strip_prefix(&prefix) {
                    error = rest.to_string();
                }
                return Err(problem(
                    format!("`{}` cannot be set to `{raw}`: {error}", path_text(&target)),
                    type_hint(&error),
                ));
            }
        }
    }
    *object =
        read_back::<T>(&root).map_err(|e| problem(format!("`{shown}`: {e}"), type_hint(&e)))?;
    Ok(())
}

fn unset_value<T: Serialize + DeserializeOwned>(
    object: &mut T,
    steps: &[PathStep],
) -> Result<(), Problem> {
    let mut root = serde_json::to_value(&*object)
        .map_err(|e| problem(e.to_string(), "report this as a bug"))?;
    let mut targets = expand(&root, steps);
    // Remove later list elements first so earlier indexes stay valid.
    targets.reverse();
    for target in targets {
        remove_at(&mut root, &target)?;
    }
    let shown = path_text(steps);
    *object =
        read_back::<T>(&root).map_err(|e| problem(format!("`{shown}`: {e}"), type_hint(&e)))?;
    Ok(())
}

/// Splits a `--set` argument at its first `=`.
pub fn split_assignment(arg: &str) -> Option<(&str, &str)> {
    arg.split_once('=')
}

fn set_all<T: Serialize + DeserializeOwned>(
    kind: Kind,
    object: &mut T,
    sets: &[String],
) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    for arg in sets {
        let result = match split_assignment(arg) {
            None => Err(problem(
                format!("`{arg}` has no value"),
                format!("write PATH=VALUE, e.g. `{}`", kind.example()),
            )),
            Some((path, value)) => {
                object_path(kind, path).and_then(|steps| set_value(object, &steps, value))
            }
        };
        if let Err(p) = result {
            errors.push(FieldError::new("--set", p.message).value(arg).hint(p.hint));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn unset_all<T: Serialize + DeserializeOwned>(
    kind: Kind,
    object: &mut T,
    unsets: &[String],
) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    for arg in unsets {
        let result = object_path(kind, arg).and_then(|steps| unset_value(object, &steps));
        if let Err(p) = result {
            errors.push(
                FieldError::new("--unset", p.message)
                    .value(arg)
                    .hint(p.hint),
            );
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Applies `--set` arguments (`cluster.spec.kubeProxy.enabled=false`; the
/// `cluster.` prefix is optional) to a cluster, in order.
pub fn set_cluster_fields(cluster: &mut Cluster, sets: &[String]) -> Result<(), Vec<FieldError>> {
    set_all(Kind::Cluster, cluster, sets)
}

/// Applies `--unset` arguments (`cluster.spec.kubeProxy`) to a cluster.
pub fn unset_cluster_fields(
    cluster: &mut Cluster,
    unsets: &[String],
) -> Result<(), Vec<FieldError>> {
    unset_all(Kind::Cluster, cluster, unsets)
}

/// Applies `--set` arguments (`instancegroup.spec.rootVolumeSize=50`; the
/// `instancegroup.` prefix is optional) to an instance group.
pub fn set_instance_group_fields(
    ig: &mut InstanceGroup,
    sets: &[String],
) -> Result<(), Vec<FieldError>> {
    set_all(Kind::InstanceGroup, ig, sets)
}

/// Applies `--unset` arguments to an instance group.
pub fn unset_instance_group_fields(
    ig: &mut InstanceGroup,
    unsets: &[String],
) -> Result<(), Vec<FieldError>> {
    unset_all(Kind::InstanceGroup, ig, unsets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::to_json_value;

    fn cluster() -> Cluster {
        let mut c = Cluster::new("a.example.com");
        c.spec.ssh_access = Some(vec!["0.0.0.0/0".into()]);
        c
    }

    fn set(c: &mut Cluster, arg: &str) -> Result<(), Vec<FieldError>> {
        set_cluster_fields(c, &[arg.to_string()])
    }

    fn at(c: &Cluster, pointer: &str) -> Value {
        to_json_value(c)
            .pointer(pointer)
            .cloned()
            .unwrap_or(Value::Null)
    }

    #[test]
    fn parses_paths() {
        assert_eq!(
            parse_path("spec.addons[0].manifest").unwrap(),
            [
                PathStep::Field("spec".into()),
                PathStep::Field("addons".into()),
                PathStep::Index(0),
                PathStep::Field("manifest".into())
            ]
        );
        assert_eq!(
            parse_path("spec.etcdClusters[*].name").unwrap()[2],
            PathStep::Every
        );
        assert!(parse_path("spec.x[").is_err());
        assert!(parse_path("spec.x[a]").is_err());
        assert!(parse_path("spec.x-y").is_err());
    }

    #[test]
    fn typed_scalars() {
        let mut c = cluster();
        set(&mut c, "cluster.spec.kubeProxy.enabled=false").unwrap();
        assert_eq!(c.spec.kube_proxy.as_ref().unwrap().enabled, Some(false));
        set(&mut c, "spec.kubernetesVersion=1.35.0").unwrap();
        assert_eq!(c.spec.kubernetes_version.as_deref(), Some("1.35.0"));
        set(&mut c, "spec.networking.calico.bpfEnabled=true").unwrap();
        assert_eq!(
            c.spec
                .networking
                .as_ref()
                .unwrap()
                .calico
                .as_ref()
                .unwrap()
                .bpf_enabled,
            Some(true)
        );
        set(
            &mut c,
            "cluster.spec.karpenter.featureGates=StaticCapacity=true",
        )
        .unwrap();
        assert_eq!(
            c.spec.karpenter.as_ref().unwrap().feature_gates.as_deref(),
            Some("StaticCapacity=true")
        );
        set(&mut c, "spec.kubelet.maxPods=200").unwrap();
        assert_eq!(c.spec.kubelet.as_ref().unwrap().max_pods, Some(200));
        set(
            &mut c,
            "spec.kubeAPIServer.auditWebhookBatchThrottleQps=1.5",
        )
        .unwrap();
        assert_eq!(
            at(&c, "/spec/kubeAPIServer/auditWebhookBatchThrottleQps"),
            json!(1.5)
        );
    }

    #[test]
    fn lists_append_and_maps_merge() {
        let mut c = cluster();
        set(
            &mut c,
            "cluster.spec.nodePortAccess=1.2.3.4/32,10.20.30.0/24",
        )
        .unwrap();
        assert_eq!(
            c.spec.node_port_access,
            Some(vec!["1.2.3.4/32".into(), "10.20.30.0/24".into()])
        );
        set(&mut c, "spec.sshAccess=10.0.0.0/8").unwrap();
        assert_eq!(
            c.spec.ssh_access,
            Some(vec!["0.0.0.0/0".into(), "10.0.0.0/8".into()])
        );
        set(&mut c, "spec.cloudLabels=team=blue").unwrap();
        set(&mut c, "spec.cloudLabels=env=prod").unwrap();
        assert_eq!(
            at(&c, "/spec/cloudLabels"),
            json!({"env": "prod", "team": "blue"})
        );
        set(&mut c, "spec.kubelet.featureGates=Foo=true").unwrap();
        assert_eq!(at(&c, "/spec/kubelet/featureGates"), json!({"Foo": "true"}));
        set(
            &mut c,
            "spec.containerd.registryMirrors=docker.io=https://a,https://b",
        )
        .unwrap();
        assert_eq!(
            at(&c, "/spec/containerd/registryMirrors"),
            json!({"docker.io": ["https://a", "https://b"]})
        );
    }

    #[test]
    fn list_elements() {
        let mut c = cluster();
        set(
            &mut c,
            "cluster.spec.addons[0].manifest=https://example.com/addon.yaml",
        )
        .unwrap();
        assert_eq!(
            at(&c, "/spec/addons"),
            json!([{"manifest": "https://example.com/addon.yaml"}])
        );
        set(&mut c, "cluster.spec.addons[1].manifest=b").unwrap();
        set(&mut c, "cluster.spec.addons[0].manifest=a").unwrap();
        assert_eq!(
            at(&c, "/spec/addons"),
            json!([{"manifest": "a"}, {"manifest": "b"}])
        );
        let e = set(&mut c, "cluster.spec.addons[5].manifest=x").unwrap_err();
        assert!(e[0].message.contains("out of range"), "{e:?}");
        set(&mut c, "spec.addons[*].manifest=z").unwrap();
        assert_eq!(
            at(&c, "/spec/addons"),
            json!([{"manifest": "z"}, {"manifest": "z"}])
        );
        let e = set(&mut c, "spec.etcdClusters[*].name=z").unwrap_err();
        assert!(e[0].message.contains("matches nothing"), "{e:?}");
    }

    #[test]
    fn untyped_fields_are_guessed() {
        let mut c = cluster();
        set(&mut c, "spec.networking.cilium.hubble.enabled=true").unwrap();
        assert_eq!(
            at(&c, "/spec/networking/cilium/hubble/enabled"),
            json!(true)
        );
        set(&mut c, "spec.kubeAPIServer.runtimeConfig=api/all=true").unwrap();
        assert_eq!(
            at(&c, "/spec/kubeAPIServer/runtimeConfig"),
            json!({"api/all": "true"})
        );
        set(&mut c, "spec.kubeAPIServer.logLevel=2").unwrap();
        assert_eq!(at(&c, "/spec/kubeAPIServer/logLevel"), json!(2));
        set(&mut c, "spec.kubeAPIServer.enableAdmissionPlugins=A,B").unwrap();
        assert_eq!(
            at(&c, "/spec/kubeAPIServer/enableAdmissionPlugins"),
            json!(["A", "B"])
        );
        set(
            &mut c,
            "spec.kubelet.evictionHard=memory.available<100Mi,nodefs.available<10%",
        )
        .unwrap();
        assert_eq!(
            at(&c, "/spec/kubelet/evictionHard"),
            json!("memory.available<100Mi,nodefs.available<10%")
        );
        set(&mut c, "spec.rollingUpdate.maxSurge=25%").unwrap();
        assert_eq!(at(&c, "/spec/rollingUpdate/maxSurge"), json!("25%"));
    }

    #[test]
    fn internal_paths_are_translated() {
        let mut c = cluster();
        set(&mut c, "spec.networking.networkCIDR=10.0.0.0/16").unwrap();
        assert_eq!(c.spec.network_cidr.as_deref(), Some("10.0.0.0/16"));
        set(&mut c, "spec.api.publicName=api.example.com").unwrap();
        assert_eq!(
            c.spec.master_public_name.as_deref(),
            Some("api.example.com")
        );
        set(&mut c, "spec.networking.topology.dns=Private").unwrap();
        assert_eq!(at(&c, "/spec/topology/dns/type"), json!("Private"));
    }

    #[test]
    fn bad_sets_name_the_path() {
        let mut c = cluster();
        let e = set(&mut c, "cluster.spec.kubeProxy.enabled=maybe").unwrap_err();
        assert_eq!(e[0].path, "--set");
        assert!(e[0].message.contains("spec.kubeProxy.enabled"), "{e:?}");
        assert!(e[0].hint.as_deref().unwrap().contains("true"), "{e:?}");
        let e = set(&mut c, "cluster.spec.kubelet.maxPods=many").unwrap_err();
        assert!(
            e[0].hint.as_deref().unwrap().contains("whole number"),
            "{e:?}"
        );
        let e = set(&mut c, "cluster.spec.kubeProxy.enabled").unwrap_err();
        assert!(e[0].message.contains("no value"), "{e:?}");
        let e = set(&mut c, "cluster.spek.foo=1").unwrap_err();
        assert!(e[0].hint.as_deref().unwrap().contains("spec"), "{e:?}");
        let e = set(&mut c, "instancegroup.spec.minSize=1").unwrap_err();
        assert!(e[0].message.contains("instancegroup"), "{e:?}");
        let e = set(&mut c, "spec.sshAccess.foo=1").unwrap_err();
        assert!(e[0].message.contains("list"), "{e:?}");
        let e = set(&mut c, "spec.kubernetesVersion.major=1").unwrap_err();
        assert!(
            e[0].hint.as_deref().unwrap().contains("text value"),
            "{e:?}"
        );
        c.spec.kubernetes_version = Some("v1.34.0".into());
        let e = set(&mut c, "spec.kubernetesVersion.major=1").unwrap_err();
        assert!(e[0].message.contains("holds a text value"), "{e:?}");
    }

    #[test]
    fn unsets() {
        let mut c = cluster();
        set(&mut c, "spec.kubeProxy.enabled=false").unwrap();
        unset_cluster_fields(&mut c, &["cluster.spec.kubeProxy.enabled".into()]).unwrap();
        assert_eq!(c.spec.kube_proxy.as_ref().unwrap().enabled, None);
        unset_cluster_fields(
            &mut c,
            &["spec.sshAccess".into(), "spec.notThere.either".into()],
        )
        .unwrap();
        assert_eq!(c.spec.ssh_access, None);
        let e = unset_cluster_fields(&mut c, &["spec.kubeProxy.enabled.x".into()]);
        assert!(e.is_ok(), "{e:?}");
        c.spec.kubernetes_version = Some("v1.34.0".into());
        let e = unset_cluster_fields(&mut c, &["spec.kubernetesVersion.x".into()]).unwrap_err();
        assert_eq!(e[0].path, "--unset");
    }

    #[test]
    fn instance_groups() {
        let mut ig =
            InstanceGroup::new("a.example.com", "nodes", crate::instance_group::Role::Node);
        set_instance_group_fields(
            &mut ig,
            &[
                "instancegroup.spec.rootVolumeSize=50".into(),
                "spec.nodeLabels=x=y".into(),
            ],
        )
        .unwrap();
        assert_eq!(ig.spec.root_volume_size, Some(50));
        assert_eq!(
            ig.spec
                .node_labels
                .as_ref()
                .unwrap()
                .get("x")
                .map(String::as_str),
            Some("y")
        );
        set_instance_group_fields(&mut ig, &["spec.taints=a=b:NoSchedule".into()]).unwrap();
        assert_eq!(ig.spec.taints, Some(vec!["a=b:NoSchedule".to_string()]));
    }
}
