//! The one printer: data to stdout (tables, YAML, JSON), nothing else.

use std::io::Write;

use kops_api::manifest::to_yaml_stream;

use crate::args::{ManifestOutput, Output};

/// A table with a header row; columns padded to line up.
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&'static str]) -> Self {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.len()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(cell.chars().count());
                }
            }
        }
        let mut out = String::new();
        let line = |cells: Vec<&str>, out: &mut String| {
            let last = cells.len().saturating_sub(1);
            for (i, cell) in cells.iter().enumerate() {
                out.push_str(cell);
                if i < last {
                    let pad = widths[i] - cell.chars().count() + 2;
                    out.push_str(&" ".repeat(pad));
                }
            }
            out.push('\n');
        };
        line(self.headers.clone(), &mut out);
        for row in &self.rows {
            line(row.iter().map(String::as_str).collect(), &mut out);
        }
        out
    }
}

/// Writes to stdout; a closed pipe (`kops get | head`) is not an error.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Prints objects as YAML (one document each) or JSON (one object, or a list).
pub fn print_objects(values: &[serde_json::Value], format: ManifestOutput) {
    match format {
        ManifestOutput::Yaml => print(&to_yaml_stream(values)),
        ManifestOutput::Json => {
            let text = match values {
                [one] => serde_json::to_string_pretty(one),
                many => serde_json::to_string_pretty(many),
            }
            .unwrap_or_default();
            print(&text);
            print("\n");
        }
    }
}

/// Maps `get`'s `-o` to a manifest format; `None` means a table.
pub fn manifest_format(output: Output) -> Option<ManifestOutput> {
    match output {
        Output::Table => None,
        Output::Yaml => Some(ManifestOutput::Yaml),
        Output::Json => Some(ManifestOutput::Json),
    }
}

/// A status line for the user, on stderr.
pub fn status(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

/// vSphere SOAP calls as one summary: the total, how many changed
/// something, and the count per method.
pub fn vsphere_calls(calls: &std::collections::BTreeMap<String, u64>) -> String {
    kops_ops::vsphere::calls_summary(calls)
}

/// What a run spent on the cloud's request-rate limits, as a clause after
/// its call count (`, 12.3s waiting on rate limits (...)`); nothing when
/// no call waited and none was throttled.
pub fn limit_waits(waits: &kops_engine::LimitWaits) -> String {
    if waits.paced == 0 && waits.throttled == 0 {
        String::new()
    } else {
        format!(", {waits}")
    }
}
