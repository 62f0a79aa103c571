//! Executes parsed templates over `serde_json::Value` data with Go `text/template`
//! semantics: `.` and `$`, variables scoped to control blocks, pipelines feeding the
//! previous value as the last argument, `missingkey=error` when failing on missing keys,
//! sorted map iteration in `range`, and `include` of other templates (kops' snippets).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::funcs;
use crate::gofmt;
use crate::govalue::truth;
use crate::parse::{self, Arg, Cmd, Control, Node, Pipe, Tree};
use crate::Error;

/// A function added by the caller (kops' channel functions, for example).
pub type CustomFunc = Box<dyn Fn(&[Value]) -> Result<Value, String> + Send + Sync>;

/// Deepest `template`/`include` nesting before giving up (guards against recursion).
const MAX_DEPTH: usize = 200;

/// A set of named templates sharing functions and the missing-key policy, like a Go
/// `*template.Template` with its associated templates.
pub struct Engine {
    trees: BTreeMap<String, Tree>,
    custom: BTreeMap<String, CustomFunc>,
    fail_on_missing: bool,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    pub fn new() -> Self {
        Engine {
            trees: BTreeMap::new(),
            custom: BTreeMap::new(),
            fail_on_missing: false,
        }
    }

    /// Go's `Option("missingkey=error")`: a map key that is absent is an error instead of
    /// `<no value>`.
    pub fn fail_on_missing(&mut self, yes: bool) -> &mut Self {
        self.fail_on_missing = yes;
        self
    }

    /// Registers a function; must come before parsing templates that call it.
    pub fn add_func(&mut self, name: &str, f: CustomFunc) -> &mut Self {
        self.custom.insert(name.to_string(), f);
        self
    }

    /// Whether `name` can be called from a template.
    pub fn has_func(&self, name: &str) -> bool {
        self.custom.contains_key(name)
            || funcs::exists(name)
            || matches!(name, "include" | "and" | "or")
    }

    /// Parses `text` as template `name`; its `define`s become templates of their own.
    pub fn add_template(&mut self, name: &str, text: &str) -> Result<(), Error> {
        self.add_template_inner(name, name, text)
    }

    pub(crate) fn add_template_inner(
        &mut self,
        key: &str,
        display: &str,
        text: &str,
    ) -> Result<(), Error> {
        let parsed = parse::parse(display, text, &|f| self.has_func(f))?;
        self.trees.insert(key.to_string(), parsed.main);
        for (n, t) in parsed.defines {
            self.trees.insert(n, t);
        }
        Ok(())
    }

    pub fn has_template(&self, name: &str) -> bool {
        self.trees.contains_key(name)
    }

    /// Renders template `name` with `data` as `.` and `$`.
    pub fn execute(&self, name: &str, data: &Value) -> Result<String, Error> {
        let tree = self
            .trees
            .get(name)
            .ok_or_else(|| Error::NoTemplate(name.to_string()))?;
        let mut out = String::new();
        let mut st = State {
            eng: self,
            tree,
            vars: vec![("$".to_string(), data.clone())],
            depth: 0,
        };
        st.walk(&tree.nodes, data, &mut out)?;
        Ok(out)
    }
}

enum Flow {
    Normal,
    Break,
    Continue,
}

struct State<'a> {
    eng: &'a Engine,
    tree: &'a Tree,
    vars: Vec<(String, Value)>,
    depth: usize,
}

fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "interface {}",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

impl<'a> State<'a> {
    fn err_at(&self, pos: usize, end: usize, msg: impl Into<String>) -> Error {
        let (line, col) = self.tree.src.location(pos);
        let text = &self.tree.src.text;
        let at = text.get(pos..end.max(pos)).unwrap_or("").to_string();
        Error::Exec {
            name: self.tree.src.name.clone(),
            line,
            col,
            template: self.tree.name.clone(),
            at,
            msg: msg.into(),
        }
    }

    fn err_cmd(&self, cmd: &Cmd, msg: impl Into<String>) -> Error {
        self.err_at(cmd.pos, cmd.end, msg)
    }

    fn walk(&mut self, nodes: &[Node], dot: &Value, out: &mut String) -> Result<Flow, Error> {
        for node in nodes {
            match self.walk_node(node, dot, out)? {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn scoped(&mut self, nodes: &[Node], dot: &Value, out: &mut String) -> Result<Flow, Error> {
        let mark = self.vars.len();
        let r = self.walk(nodes, dot, out);
        self.vars.truncate(mark);
        r
    }

    fn walk_node(&mut self, node: &Node, dot: &Value, out: &mut String) -> Result<Flow, Error> {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Action(pipe) => {
                let v = self.pipeline(pipe, dot)?;
                if pipe.decl.is_empty() {
                    out.push_str(&gofmt::print_top(&v));
                }
            }
            Node::If(c) | Node::With(c) => {
                let mark = self.vars.len();
                let r = self.if_with(c, matches!(node, Node::With(_)), dot, out);
                self.vars.truncate(mark);
                return r;
            }
            Node::Range(c) => return self.range(c, dot, out),
            Node::Template { pos, name, pipe } => {
                let data = match pipe {
                    Some(p) => self.pipeline(p, dot)?,
                    None => Value::Null,
                };
                let rendered = self.call_template(name, &data).map_err(|e| match e {
                    Error::NoTemplate(n) => self.err_at(
                        *pos,
                        *pos,
                        format!(
                            "template: no template {n:?} associated with template {:?}",
                            self.tree.name
                        ),
                    ),
                    e => e,
                })?;
                out.push_str(&rendered);
            }
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn call_template(&mut self, name: &str, data: &Value) -> Result<String, Error> {
        let tree = self
            .eng
            .trees
            .get(name)
            .ok_or_else(|| Error::NoTemplate(name.to_string()))?;
        if self.depth >= MAX_DEPTH {
            return Err(Error::Depth(MAX_DEPTH));
        }
        let mut st = State {
            eng: self.eng,
            tree,
            vars: vec![("$".to_string(), data.clone())],
            depth: self.depth + 1,
        };
        let mut out = String::new();
        st.walk(&tree.nodes, data, &mut out)?;
        Ok(out)
    }

    fn if_with(
        &mut self,
        c: &Control,
        with: bool,
        dot: &Value,
        out: &mut String,
    ) -> Result<Flow, Error> {
        let v = self.pipeline(&c.pipe, dot)?;
        if truth(&v) {
            let d = if with { &v } else { dot };
            self.scoped(&c.list, d, out)
        } else if let Some(e) = &c.else_list {
            self.scoped(e, dot, out)
        } else {
            Ok(Flow::Normal)
        }
    }

    fn range(&mut self, c: &Control, dot: &Value, out: &mut String) -> Result<Flow, Error> {
        let mark = self.vars.len();
        let v = self.commands(&c.pipe.cmds, dot)?;
        let items: Vec<(Value, Value)> = match &v {
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, x)| (Value::from(i), x.clone()))
                .collect(),
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                keys.into_iter()
                    .map(|k| (Value::from(k.clone()), m[k].clone()))
                    .collect()
            }
            Value::Null => Vec::new(),
            Value::Number(n) if n.is_i64() => {
                if c.pipe.decl.len() > 1 {
                    return Err(self.err_at(
                        c.pos,
                        c.pos,
                        "can't use integer as the key/value pair of range",
                    ));
                }
                (0..n.as_i64().unwrap_or(0))
                    .map(|i| (Value::from(i), Value::from(i)))
                    .collect()
            }
            other => {
                return Err(self.err_at(
                    c.pipe.pos,
                    c.pipe.pos,
                    format!("range can't iterate over {}", gofmt::sprint(other)),
                ));
            }
        };
        if items.is_empty() {
            if let Some(e) = &c.else_list {
                return self.scoped(e, dot, out);
            }
            return Ok(Flow::Normal);
        }
        for (k, elem) in items {
            match c.pipe.decl.as_slice() {
                [] => {}
                [e] => self.declare(e, elem.clone(), c.pipe.is_assign),
                [i, e, ..] => {
                    self.declare(i, k, c.pipe.is_assign);
                    self.declare(e, elem.clone(), c.pipe.is_assign);
                }
            }
            let flow = self.scoped(&c.list, &elem, out)?;
            if !c.pipe.is_assign {
                self.vars.truncate(mark);
            }
            if let Flow::Break = flow {
                break;
            }
        }
        self.vars.truncate(mark);
        Ok(Flow::Normal)
    }

    fn declare(&mut self, name: &str, v: Value, assign: bool) {
        if assign {
            if let Some(slot) = self.vars.iter_mut().rev().find(|(n, _)| n == name) {
                slot.1 = v;
                return;
            }
        }
        self.vars.push((name.to_string(), v));
    }

    fn pipeline(&mut self, pipe: &Pipe, dot: &Value) -> Result<Value, Error> {
        let v = self.commands(&pipe.cmds, dot)?;
        if let Some(name) = pipe.decl.first() {
            if pipe.is_assign && !self.vars.iter().any(|(n, _)| n == name) {
                return Err(self.err_at(pipe.pos, pipe.pos, format!("undefined variable: {name}")));
            }
            self.declare(name, v.clone(), pipe.is_assign);
        }
        Ok(v)
    }

    fn commands(&mut self, cmds: &[Cmd], dot: &Value) -> Result<Value, Error> {
        let mut val: Option<Value> = None;
        for cmd in cmds {
            val = Some(self.command(cmd, dot, val.take())?);
        }
        Ok(val.unwrap_or(Value::Null))
    }

    fn command(&mut self, cmd: &Cmd, dot: &Value, piped: Option<Value>) -> Result<Value, Error> {
        match &cmd.args[0] {
            Arg::Func(name) => self.call(name, cmd, &cmd.args[1..], piped, dot),
            Arg::Nil => Err(self.err_cmd(cmd, "nil is not a command")),
            first => {
                if cmd.args.len() > 1 || piped.is_some() {
                    let what = self.tree.src.text.get(cmd.pos..cmd.end).unwrap_or("");
                    return Err(
                        self.err_cmd(cmd, format!("can't give argument to non-function {what}"))
                    );
                }
                self.arg(cmd, first, dot)
            }
        }
    }

    fn var(&self, cmd: &Cmd, name: &str) -> Result<Value, Error> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| self.err_cmd(cmd, format!("undefined variable: {name}")))
    }

    fn arg(&mut self, cmd: &Cmd, arg: &Arg, dot: &Value) -> Result<Value, Error> {
        let span = cmd
            .args
            .iter()
            .position(|a| std::ptr::eq(a, arg))
            .and_then(|i| cmd.spans.get(i).copied())
            .unwrap_or((cmd.pos, cmd.end));
        match arg {
            Arg::Dot => Ok(dot.clone()),
            Arg::Field(names) => self.fields(span, dot.clone(), names),
            Arg::Var(name, names) => {
                let v = self.var(cmd, name)?;
                self.fields(span, v, names)
            }
            Arg::Pipe(p, names) => {
                let mark = self.vars.len();
                let v = self.pipeline(p, dot);
                self.vars.truncate(mark);
                self.fields(span, v?, names)
            }
            Arg::Const(v) => Ok(v.clone()),
            Arg::Nil => Ok(Value::Null),
            Arg::Func(name) => self.call(name, cmd, &[], None, dot),
        }
    }

    fn fields(&self, span: (usize, usize), mut v: Value, names: &[String]) -> Result<Value, Error> {
        for name in names {
            v = match v {
                Value::Object(mut m) => match m.remove(name) {
                    Some(x) => x,
                    None if self.eng.fail_on_missing => {
                        return Err(self.err_at(
                            span.0,
                            span.1,
                            format!("map has no entry for key {name:?}"),
                        ));
                    }
                    None => Value::Null,
                },
                Value::Null if self.eng.fail_on_missing => {
                    return Err(self.err_at(
                        span.0,
                        span.1,
                        format!("nil pointer evaluating interface {{}}.{name}"),
                    ));
                }
                Value::Null => Value::Null,
                other => {
                    return Err(self.err_at(
                        span.0,
                        span.1,
                        format!("can't evaluate field {name} in type {}", go_type(&other)),
                    ));
                }
            };
        }
        Ok(v)
    }

    fn call(
        &mut self,
        name: &str,
        cmd: &Cmd,
        args: &[Arg],
        piped: Option<Value>,
        dot: &Value,
    ) -> Result<Value, Error> {
        // `and`/`or` stop evaluating at the first deciding operand and return it.
        if name == "and" || name == "or" {
            let total = args.len() + usize::from(piped.is_some());
            if total == 0 {
                return Err(self.err_cmd(
                    cmd,
                    format!("wrong number of args for {name}: want at least 1 got 0"),
                ));
            }
            let mut last = Value::Null;
            for a in args {
                last = self.arg(cmd, a, dot)?;
                if truth(&last) == (name == "or") {
                    return Ok(last);
                }
            }
            if let Some(p) = piped {
                last = p;
            }
            return Ok(last);
        }
        let mut vals = Vec::with_capacity(args.len() + 1);
        for a in args {
            vals.push(self.arg(cmd, a, dot)?);
        }
        if let Some(p) = piped {
            vals.push(p);
        }
        let result = if name == "include" {
            self.include(cmd, &vals)?
        } else if let Some(f) = self.eng.custom.get(name) {
            f(&vals).map_err(|e| self.err_cmd(cmd, format!("error calling {name}: {e}")))?
        } else {
            funcs::call(name, vals)
                .map_err(|e| self.err_cmd(cmd, format!("error calling {name}: {e}")))?
        };
        // Sprig's set/unset/merge change the map they are given in place; values here are
        // copies, so write the result back when that map is a variable (`$d` or `$d.a.b`).
        if matches!(
            name,
            "set" | "unset" | "merge" | "mergeOverwrite" | "mustMerge" | "mustMergeOverwrite"
        ) {
            if let Some(Arg::Var(var, path)) = args.first() {
                self.write_back(var, path, result.clone());
            }
        }
        Ok(result)
    }

    fn write_back(&mut self, var: &str, path: &[String], v: Value) {
        let Some(slot) = self.vars.iter_mut().rev().find(|(n, _)| n == var) else {
            return;
        };
        let mut target = &mut slot.1;
        for p in path {
            match target {
                Value::Object(m) => match m.get_mut(p) {
                    Some(t) => target = t,
                    None => return,
                },
                _ => return,
            }
        }
        *target = v;
    }

    fn include(&mut self, cmd: &Cmd, vals: &[Value]) -> Result<Value, Error> {
        let [Value::String(name), data] = vals else {
            return Err(self.err_cmd(
                cmd,
                "error calling include: want a snippet name and a context",
            ));
        };
        match self.call_template(name, data) {
            Ok(s) => Ok(Value::String(s)),
            Err(Error::NoTemplate(n)) => Err(self.err_cmd(
                cmd,
                format!("error calling include: snippet: {n}, issue: no such template {n:?}"),
            )),
            Err(e) => Err(e),
        }
    }
}
