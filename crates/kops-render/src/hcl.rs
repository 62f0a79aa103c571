//! A small HCL 2 document model and writer, formatted the way
//! `terraform fmt` lays files out (and kops writes them): attributes and
//! blocks sorted by name, `=` aligned over runs of one-line attributes,
//! maps with quoted keys, two-space indentation.

use std::fmt::Write as _;

/// An expression on the right of `=`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A quoted string (escaped when written).
    Str(String),
    Int(i64),
    Bool(bool),
    /// Written as is: a reference (`aws_vpc.x.id`), a function call, `null`.
    Raw(String),
    /// `[a, b]` on one line.
    List(Vec<Expr>),
    /// `{ "k" = v }`, one entry a line, keys quoted.
    Map(Vec<(String, Expr)>),
}

impl Expr {
    pub fn str(s: impl Into<String>) -> Self {
        Self::Str(s.into())
    }

    pub fn raw(s: impl Into<String>) -> Self {
        Self::Raw(s.into())
    }

    fn is_multiline(&self) -> bool {
        matches!(self, Expr::Map(entries) if !entries.is_empty())
    }
}

impl From<&str> for Expr {
    fn from(s: &str) -> Self {
        Expr::Str(s.to_string())
    }
}
impl From<String> for Expr {
    fn from(s: String) -> Self {
        Expr::Str(s)
    }
}
impl From<&String> for Expr {
    fn from(s: &String) -> Self {
        Expr::Str(s.clone())
    }
}
impl From<i32> for Expr {
    fn from(v: i32) -> Self {
        Expr::Int(v.into())
    }
}
impl From<i64> for Expr {
    fn from(v: i64) -> Self {
        Expr::Int(v)
    }
}
impl From<bool> for Expr {
    fn from(v: bool) -> Self {
        Expr::Bool(v)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Attr(Expr),
    Block(Body),
}

/// The inside of a block: attributes and nested blocks. A block name may
/// repeat (`tag { }` per tag); attributes are set once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Body {
    items: Vec<(String, Item)>,
}

impl Body {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name = value`, replacing an earlier value.
    pub fn set(&mut self, name: &str, value: impl Into<Expr>) -> &mut Self {
        let value = value.into();
        if let Some((_, item)) = self
            .items
            .iter_mut()
            .find(|(n, i)| n == name && matches!(i, Item::Attr(_)))
        {
            *item = Item::Attr(value);
        } else {
            self.items.push((name.to_string(), Item::Attr(value)));
        }
        self
    }

    /// Sets `name = value` when there is a value.
    pub fn set_opt<V: Into<Expr>>(&mut self, name: &str, value: Option<V>) -> &mut Self {
        if let Some(v) = value {
            self.set(name, v);
        }
        self
    }

    /// Adds a nested block `name { ... }`.
    pub fn block(&mut self, name: &str, body: Body) -> &mut Self {
        self.items.push((name.to_string(), Item::Block(body)));
        self
    }

    /// Whether `name` is set as an attribute.
    pub fn has(&self, name: &str) -> bool {
        self.items.iter().any(|(n, _)| n == name)
    }

    fn sorted(&self) -> Vec<&(String, Item)> {
        let mut items: Vec<&(String, Item)> = self.items.iter().collect();
        items.sort_by(|a, b| a.0.cmp(&b.0)); // stable: repeated blocks keep their order
        items
    }

    /// Writes the items at `indent` levels.
    pub fn write(&self, out: &mut String, indent: usize) {
        let items = self.sorted();
        let mut i = 0;
        while i < items.len() {
            match &items[i].1 {
                Item::Block(body) => {
                    let pad = "  ".repeat(indent);
                    let _ = writeln!(out, "{pad}{} {{", items[i].0);
                    body.write(out, indent + 1);
                    let _ = writeln!(out, "{pad}}}");
                    i += 1;
                }
                Item::Attr(expr) if expr.is_multiline() => {
                    write_attr(out, indent, &items[i].0, 0, expr);
                    i += 1;
                }
                Item::Attr(_) => {
                    // A run of one-line attributes, aligned together.
                    let start = i;
                    while i < items.len()
                        && matches!(&items[i].1, Item::Attr(e) if !e.is_multiline())
                    {
                        i += 1;
                    }
                    let width = items[start..i]
                        .iter()
                        .map(|(n, _)| n.len())
                        .max()
                        .unwrap_or(0);
                    for (name, item) in &items[start..i] {
                        if let Item::Attr(expr) = item {
                            write_attr(out, indent, name, width, expr);
                        }
                    }
                }
            }
        }
    }
}

fn write_attr(out: &mut String, indent: usize, name: &str, width: usize, expr: &Expr) {
    let pad = "  ".repeat(indent);
    let _ = write!(out, "{pad}{name:<width$} = ");
    write_expr(out, indent, expr);
    out.push('\n');
}

fn write_expr(out: &mut String, indent: usize, expr: &Expr) {
    match expr {
        Expr::Str(s) => out.push_str(&quote(s)),
        Expr::Int(v) => {
            let _ = write!(out, "{v}");
        }
        Expr::Bool(v) => {
            let _ = write!(out, "{v}");
        }
        Expr::Raw(s) => out.push_str(s),
        Expr::List(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_expr(out, indent, item);
            }
            out.push(']');
        }
        Expr::Map(entries) if entries.is_empty() => out.push_str("{}"),
        Expr::Map(entries) => {
            out.push_str("{\n");
            let keys: Vec<String> = entries.iter().map(|(k, _)| quote(k)).collect();
            let width = keys.iter().map(String::len).max().unwrap_or(0);
            let pad = "  ".repeat(indent + 1);
            for (key, (_, value)) in keys.iter().zip(entries) {
                let _ = write!(out, "{pad}{key:<width$} = ");
                write_expr(out, indent + 1, value);
                out.push('\n');
            }
            let _ = write!(out, "{}}}", "  ".repeat(indent));
        }
    }
}

/// An HCL quoted string: `"`, `\` and control characters escaped, `${`
/// and `%{` doubled so they are not read as templates.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A top-level block with labels: `resource "aws_vpc" "main" { ... }`.
pub fn write_block(out: &mut String, kind: &str, labels: &[&str], body: &Body) {
    out.push_str(kind);
    for label in labels {
        out.push(' ');
        out.push_str(&quote(label));
    }
    out.push_str(" {\n");
    body.write(out, 1);
    out.push_str("}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_runs_and_sorts() {
        let mut b = Body::new();
        b.set("size", 20)
            .set("availability_zone", "us-test-1a")
            .set(
                "tags",
                Expr::Map(vec![
                    ("Name".into(), "x".into()),
                    ("KubernetesCluster".into(), "c".into()),
                ]),
            )
            .set("type", "gp3")
            .set("throughput", 125);
        let mut out = String::new();
        write_block(&mut out, "resource", &["aws_ebs_volume", "v"], &b);
        assert_eq!(
            out,
            "resource \"aws_ebs_volume\" \"v\" {\n  availability_zone = \"us-test-1a\"\n  size              = 20\n  tags = {\n    \"Name\"              = \"x\"\n    \"KubernetesCluster\" = \"c\"\n  }\n  throughput = 125\n  type       = \"gp3\"\n}\n"
        );
    }

    #[test]
    fn escapes_templates() {
        assert_eq!(quote("a\"${b}\n"), "\"a\\\"$${b}\\n\"");
    }
}
