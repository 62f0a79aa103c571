//! `kops toolbox template`: gathers values, snippets and templates from disk, renders each
//! template and joins the results into one multi-document YAML stream.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::exec::Engine;
use crate::values::{merge_maps, parse_set, yaml_to_json};
use crate::{gofmt, Error};

/// The name kops gives the template being rendered; snippets may not use it.
const MAIN: &str = "mainTemplate";

/// The command's inputs, mirroring its flags.
#[derive(Debug, Clone, Default)]
pub struct ToolboxOptions {
    /// `--template`: files or directories (walked recursively, in name order).
    pub templates: Vec<PathBuf>,
    /// `--values`: files or directories, deep-merged in order.
    pub values: Vec<PathBuf>,
    /// `--set`: typed values.
    pub set: Vec<String>,
    /// `--set-string`: string values.
    pub set_string: Vec<String>,
    /// `--snippets`: files or directories; each file is a template named by its basename.
    pub snippets: Vec<PathBuf>,
    /// `--fail-on-missing` (kops' default is true).
    pub fail_on_missing: bool,
    /// `--format-yaml`: re-marshal every document (sorted keys, normalised layout).
    pub format_yaml: bool,
    /// The positional CLUSTER argument: `.clusterName` unless the values set one.
    pub cluster_name: Option<String>,
}

/// Lists the files under `path` (or `path` itself when it is a file), like Go's
/// `filepath.Walk`: depth first, entries in byte order.
pub fn expand_files(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    walk(path, &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

/// The template context: merged `--values`, then `--set`, then `--set-string`, plus
/// `clusterName` from the positional argument when the values have none.
pub fn load_values(opts: &ToolboxOptions) -> Result<Map<String, Value>, Error> {
    let mut ctx = Map::new();
    for p in &opts.values {
        for f in expand_files(p)? {
            let v = yaml_to_json(&read(&f)?).map_err(|e| {
                Error::Values(format!(
                    "unable decode the configuration file: {}, error: {e}",
                    f.display()
                ))
            })?;
            match v {
                Value::Object(m) => merge_maps(&mut ctx, m),
                Value::Null => {}
                other => {
                    return Err(Error::Values(format!(
                        "unable decode the configuration file: {}, error: expected a map, got {}",
                        f.display(),
                        gofmt::sprint(&other)
                    )))
                }
            }
        }
    }
    for s in &opts.set {
        parse_set(s, &mut ctx, false)
            .map_err(|e| Error::Values(format!("failed parsing --set data: {e}")))?;
    }
    for s in &opts.set_string {
        parse_set(s, &mut ctx, true)
            .map_err(|e| Error::Values(format!("failed parsing --set-string data: {e}")))?;
    }
    if !matches!(ctx.get("clusterName"), Some(Value::String(_))) {
        ctx.insert(
            "clusterName".into(),
            Value::String(opts.cluster_name.clone().unwrap_or_default()),
        );
    }
    Ok(ctx)
}

/// Reads the snippets: `(basename, text)`, later files replacing earlier ones of the same name.
pub fn load_snippets(opts: &ToolboxOptions) -> Result<Vec<(String, String)>, Error> {
    let mut out: Vec<(String, String)> = Vec::new();
    for p in &opts.snippets {
        for f in expand_files(p)? {
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = read(&f)?;
            out.retain(|(n, _)| *n != name);
            out.push((name, text));
        }
    }
    Ok(out)
}

/// Renders one template text (named `display` in errors) with the snippets beside it.
/// `setup` may register extra functions before anything is parsed.
pub fn render_one(
    display: &str,
    text: &str,
    ctx: &Value,
    snippets: &[(String, String)],
    fail_on_missing: bool,
    setup: &dyn Fn(&mut Engine),
) -> Result<String, Error> {
    let mut eng = Engine::new();
    eng.fail_on_missing(fail_on_missing);
    setup(&mut eng);
    eng.add_template_as(MAIN, display, text)?;
    for (name, snippet) in snippets {
        if name == MAIN {
            return Err(Error::Values(format!(
                "snippet cannot have the same name as the template: {name}"
            )));
        }
        eng.add_template(name, snippet)
            .map_err(|e| Error::Values(format!("unable to parse snippet: {name}, error: {e}")))?;
    }
    eng.execute(MAIN, ctx)
}

/// The whole command: the text kops would write to `--output` or stdout.
pub fn run(opts: &ToolboxOptions, setup: &dyn Fn(&mut Engine)) -> Result<String, Error> {
    let ctx = Value::Object(load_values(opts)?);
    let snippets = load_snippets(opts)?;
    let mut templates = Vec::new();
    for p in &opts.templates {
        templates.extend(expand_files(p)?);
    }
    let mut documents: Vec<String> = Vec::new();
    for t in templates {
        let display = t.display().to_string();
        let text = read(&t)?;
        let rendered = render_one(
            &display,
            &text,
            &ctx,
            &snippets,
            opts.fail_on_missing,
            setup,
        )
        .map_err(|e| Error::Render {
            template: display.clone(),
            source: Box::new(e),
        })?;
        if rendered.is_empty() {
            continue;
        }
        if !opts.format_yaml {
            documents.extend(rendered.split("---\n").map(str::to_string));
            continue;
        }
        for doc in rendered.split("---\n") {
            let v = yaml_to_json(doc).map_err(|e| {
                Error::Values(format!(
                    "unable to unmarshall content from template: {doc}, error: {e}"
                ))
            })?;
            let m = match v {
                Value::Object(m) => m,
                Value::Null => continue,
                other => {
                    return Err(Error::Values(format!(
                        "unable to unmarshall content from template: {doc}, error: expected a map, got {}",
                        gofmt::sprint(&other)
                    )))
                }
            };
            if m.is_empty() {
                continue;
            }
            documents.push(crate::yaml::to_yaml(&Value::Object(m)).map_err(Error::Values)?);
        }
    }
    Ok(documents.join("---\n"))
}
