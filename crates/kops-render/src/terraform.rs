//! The Terraform writer: `kubernetes.tf` plus `data/` files, laid out as
//! kops writes them (locals, outputs, providers, resources and data sources
//! sorted by type and name, then the `terraform` block).

use std::collections::BTreeMap;

use kops_engine::TaskKey;

use crate::hcl::{write_block, Body, Expr};
use crate::outcome::{RenderError, Rendered};

/// kops' Terraform resource name for a task name: a leading digit gets a
/// `prefix_`, then `.`→`-`, `/`→`--`, `:`→`_`.
pub fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        out.push_str("prefix_");
    }
    for c in name.chars() {
        match c {
            '.' => out.push('-'),
            '/' => out.push_str("--"),
            ':' => out.push('_'),
            c => out.push(c),
        }
    }
    out
}

/// How a task is reached from other resources.
#[derive(Debug, Clone)]
pub enum Target {
    /// A resource in this file: `type.name`.
    Resource { kind: &'static str, name: String },
    /// An existing object: its literal id.
    Literal(String),
    /// An existing object Terraform looks up: `data.type.name`.
    Data { kind: &'static str, name: String },
    /// An existing object only the cloud knows and Terraform cannot look
    /// up: its id is an input variable, `var.name`.
    Variable(String),
    /// Not rendered as its own resource (folded into another one).
    None,
}

/// The cloud's Terraform provider: its `provider` block and its
/// `required_providers` entry. AWS is the default ([`Terraform::new`]);
/// another cloud's crate passes its own ([`Terraform::with_provider`]).
#[derive(Debug, Clone)]
pub struct Provider {
    /// `aws`, `google`.
    pub name: &'static str,
    /// The attributes of `provider "<name>" { ... }`.
    pub config: Body,
    /// `hashicorp/aws`.
    pub source: &'static str,
    /// The version constraint (`>= 5.0.0`).
    pub version: &'static str,
}

impl Provider {
    /// `provider "aws" { region = ... }`.
    pub fn aws(region: &str) -> Self {
        let mut config = Body::new();
        config.set("region", region);
        Self {
            name: "aws",
            config,
            source: "hashicorp/aws",
            version: ">= 5.0.0",
        }
    }
}

/// Collects the resources of one render.
pub struct Terraform {
    targets: BTreeMap<TaskKey, Target>,
    resources: BTreeMap<(String, String), Body>,
    data_sources: BTreeMap<(String, String), Body>,
    variables: BTreeMap<String, Body>,
    locals: BTreeMap<String, Expr>,
    outputs: BTreeMap<String, Expr>,
    files: BTreeMap<String, Vec<u8>>,
    provider: Provider,
    /// The region of the `aws.files` provider (state-store objects in S3).
    files_region: String,
    files_provider: bool,
    google_files_provider: bool,
}

impl Terraform {
    pub fn new(region: &str, targets: BTreeMap<TaskKey, Target>) -> Self {
        Self::with_provider(Provider::aws(region), region, targets)
    }

    /// A render for another cloud's provider; state-store objects in S3
    /// still use `aws.files` in `files_region`.
    pub fn with_provider(
        provider: Provider,
        files_region: &str,
        targets: BTreeMap<TaskKey, Target>,
    ) -> Self {
        Self {
            targets,
            resources: BTreeMap::new(),
            data_sources: BTreeMap::new(),
            variables: BTreeMap::new(),
            locals: BTreeMap::new(),
            outputs: BTreeMap::new(),
            files: BTreeMap::new(),
            provider,
            files_region: files_region.to_string(),
            files_provider: false,
            google_files_provider: false,
        }
    }

    /// `type.name.attr` for the task `key`, or its literal id when it exists
    /// already (for `id`-like attributes).
    pub fn reference(&self, key: &TaskKey, attr: &str) -> Result<Expr, RenderError> {
        match self.targets.get(key) {
            Some(Target::Resource { kind, name }) => Ok(Expr::Raw(format!("{kind}.{name}.{attr}"))),
            Some(Target::Literal(id)) => Ok(Expr::Str(id.clone())),
            Some(Target::Data { kind, name }) => {
                Ok(Expr::Raw(format!("data.{kind}.{name}.{attr}")))
            }
            Some(Target::Variable(name)) => Ok(Expr::Raw(format!("var.{name}"))),
            Some(Target::None) | None => Err(RenderError::Reference {
                key: key.clone(),
                attr: attr.to_string(),
            }),
        }
    }

    /// The address of `key`, when it is a resource here.
    pub fn address(&self, key: &TaskKey) -> Option<(&'static str, &str)> {
        match self.targets.get(key) {
            Some(Target::Resource { kind, name }) => Some((kind, name.as_str())),
            _ => None,
        }
    }

    /// Adds `resource "kind" "sanitize(name)"`.
    pub fn resource(&mut self, kind: &str, name: &str, body: Body) {
        self.resources
            .insert((kind.to_string(), sanitize(name)), body);
    }

    /// Adds `data "kind" "sanitize(name)"` and returns its address.
    pub fn data_source(&mut self, kind: &str, name: &str, body: Body) -> String {
        let name = sanitize(name);
        let address = format!("data.{kind}.{name}");
        self.data_sources.insert((kind.to_string(), name), body);
        address
    }

    /// Declares `variable "name"`: a string the user passes (`-var`).
    pub fn variable(&mut self, name: &str, description: &str) {
        let mut body = Body::new();
        body.set("description", description)
            .set("type", Expr::raw("string"));
        self.variables.insert(name.to_string(), body);
    }

    /// Stores `data/<kind>_<name>_<field>` and returns the expression that
    /// reads it (`file(...)`, or `filebase64(...)` for user data).
    pub fn file(
        &mut self,
        kind: &str,
        name: &str,
        field: &str,
        data: Vec<u8>,
        base64: bool,
    ) -> Expr {
        let file = format!("{kind}_{name}_{field}");
        let function = if base64 { "filebase64" } else { "file" };
        let expr = Expr::Raw(format!("{function}(\"${{path.module}}/data/{file}\")"));
        self.files.insert(format!("data/{file}"), data);
        expr
    }

    /// Stores `data/<kind>_<name>_<field>` and returns its path as a string
    /// (`"${path.module}/data/..."`), for resources that take a file name
    /// rather than contents.
    pub fn file_path(&mut self, kind: &str, name: &str, field: &str, data: Vec<u8>) -> Expr {
        let file = format!("{kind}_{name}_{field}");
        self.files.insert(format!("data/{file}"), data);
        Expr::Raw(format!("\"${{path.module}}/data/{file}\""))
    }

    /// Marks that state-store objects in Cloud Storage use the
    /// `google.files` provider alias.
    pub fn use_google_files_provider(&mut self) {
        self.google_files_provider = true;
    }

    /// Marks that state-store objects use the `aws.files` provider alias.
    pub fn use_files_provider(&mut self) {
        self.files_provider = true;
    }

    /// Sets a local value and the output of the same name.
    pub fn output(&mut self, name: &str, value: Expr) {
        self.locals.insert(name.to_string(), value.clone());
        self.outputs.insert(name.to_string(), value);
    }

    /// Sets a local value only.
    pub fn local(&mut self, name: &str, value: Expr) {
        self.locals.insert(name.to_string(), value);
    }

    pub fn has_resource(&self, kind: &str, name: &str) -> bool {
        self.resources
            .contains_key(&(kind.to_string(), sanitize(name)))
    }

    /// Lays the file out: `kubernetes.tf` and the `data/` files.
    pub fn finish(self) -> Rendered {
        let mut out = String::new();
        if !self.locals.is_empty() {
            let mut body = Body::new();
            for (name, value) in &self.locals {
                body.set(name, value.clone());
            }
            out.push_str("locals {\n");
            body.write(&mut out, 1);
            out.push_str("}\n\n");
        }
        for (name, value) in &self.outputs {
            let mut body = Body::new();
            body.set("value", value.clone());
            write_block(&mut out, "output", &[name], &body);
            out.push('\n');
        }
        for (name, body) in &self.variables {
            write_block(&mut out, "variable", &[name], body);
            out.push('\n');
        }
        write_block(
            &mut out,
            "provider",
            &[self.provider.name],
            &self.provider.config,
        );
        out.push('\n');
        if self.files_provider {
            let mut files = Body::new();
            files
                .set("alias", "files")
                .set("region", self.files_region.as_str());
            write_block(&mut out, "provider", &["aws"], &files);
            out.push('\n');
        }
        if self.google_files_provider {
            let mut files = Body::new();
            files.set("alias", "files");
            write_block(&mut out, "provider", &["google"], &files);
            out.push('\n');
        }
        for ((kind, name), body) in &self.resources {
            write_block(&mut out, "resource", &[kind, name], body);
            out.push('\n');
        }
        for ((kind, name), body) in &self.data_sources {
            write_block(&mut out, "data", &[kind, name], body);
            out.push('\n');
        }
        let entry = |source: &str, version: &str| {
            vec![
                ("source".to_string(), Expr::str(source)),
                ("version".to_string(), Expr::str(version)),
            ]
        };
        let mut providers = Body::new();
        let primary = entry(self.provider.source, self.provider.version);
        if self.files_provider {
            let mut aws = if self.provider.name == "aws" {
                primary.clone()
            } else {
                let aws = Provider::aws(&self.files_region);
                entry(aws.source, aws.version)
            };
            aws.insert(
                0,
                (
                    "configuration_aliases".to_string(),
                    Expr::List(vec![Expr::raw("aws.files")]),
                ),
            );
            providers.set("aws", Expr::Map(aws));
        }
        if self.google_files_provider {
            let mut google = if self.provider.name == "google" {
                primary.clone()
            } else {
                entry("hashicorp/google", ">= 5.11.0")
            };
            google.insert(
                0,
                (
                    "configuration_aliases".to_string(),
                    Expr::List(vec![Expr::raw("google.files")]),
                ),
            );
            providers.set("google", Expr::Map(google));
        }
        if !providers.has(self.provider.name) {
            providers.set(self.provider.name, Expr::Map(primary));
        }
        // kops writes `required_version` before the providers (not sorted).
        let mut terraform = Body::new();
        terraform.block("required_providers", providers);
        out.push_str("terraform {\n  required_version = \">= 0.15.0\"\n");
        terraform.write(&mut out, 1);
        out.push_str("}\n");

        let mut files = self.files;
        files.insert("kubernetes.tf".to_string(), out.into_bytes());
        Rendered { files }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_kops() {
        assert_eq!(sanitize("masters.a.example.com"), "masters-a-example-com");
        assert_eq!(sanitize("0.0.0.0/0"), "prefix_0-0-0-0--0");
        assert_eq!(sanitize("from-::/0-x"), "from-__--0-x");
    }
}
