//! Lexer and parser for Go `text/template` syntax.
//!
//! The source is cut into text and actions (`{{ ... }}`), with the `{{- `/` -}}`
//! trim markers applied while cutting, then actions are parsed into a small tree:
//! control nodes (`if`, `range`, `with`, `template`, ...) over pipelines of
//! commands. Positions are byte offsets into the source, turned into
//! `line:col` only when an error is reported.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::Error;

/// One parsed template file (or snippet): its main body and the `define`s it holds.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub main: Tree,
    pub defines: BTreeMap<String, Tree>,
}

/// A named body of nodes plus the source it was parsed from (for error positions).
#[derive(Debug, Clone)]
pub struct Tree {
    pub name: String,
    pub src: Arc<Source>,
    pub nodes: Vec<Node>,
}

/// The text a tree came from, named as it appears in error messages.
#[derive(Debug)]
pub struct Source {
    pub name: String,
    pub text: String,
}

impl Source {
    /// Go's `file:line:col` for a byte offset (line 1-based, column 0-based bytes).
    pub fn location(&self, pos: usize) -> (usize, usize) {
        let pos = pos.min(self.text.len());
        let before = &self.text.as_bytes()[..pos];
        let line = 1 + before.iter().filter(|b| **b == b'\n').count();
        let col = match before.iter().rposition(|b| *b == b'\n') {
            Some(i) => pos - i - 1,
            None => pos,
        };
        (line, col)
    }
}

#[derive(Debug, Clone)]
pub enum Node {
    Text(String),
    Action(Pipe),
    If(Control),
    Range(Control),
    With(Control),
    Template {
        pos: usize,
        name: String,
        pipe: Option<Pipe>,
    },
    Break,
    Continue,
}

#[derive(Debug, Clone)]
pub struct Control {
    pub pos: usize,
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

#[derive(Debug, Clone)]
pub struct Pipe {
    pub pos: usize,
    pub decl: Vec<String>,
    pub is_assign: bool,
    pub cmds: Vec<Cmd>,
}

#[derive(Debug, Clone)]
pub struct Cmd {
    pub pos: usize,
    /// Source span of the command, shown as `<...>` in execution errors.
    pub end: usize,
    pub args: Vec<Arg>,
    /// Source span of each argument, for errors about that argument.
    pub spans: Vec<(usize, usize)>,
}

#[derive(Debug, Clone)]
pub enum Arg {
    Dot,
    /// `.a.b`
    Field(Vec<String>),
    /// `$x.a.b` (`$` alone is the root data)
    Var(String, Vec<String>),
    /// A function name.
    Func(String),
    /// `(pipeline).a.b`
    Pipe(Box<Pipe>, Vec<String>),
    Const(Value),
    Nil,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Field(String),
    Dot,
    Var(String),
    Str(String),
    Num(Value),
    LParen,
    RParen,
    Pipe,
    Declare,
    Assign,
    Comma,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    pos: usize,
    end: usize,
    space_before: bool,
}

enum Item {
    Text(String),
    Action { pos: usize, toks: Vec<Token> },
}

const KEYWORDS: &[&str] = &[
    "if", "else", "end", "range", "with", "define", "template", "block", "break", "continue",
];

/// Parses `text` as a template called `name`; `is_func` says which function names exist
/// (Go rejects unknown functions at parse time).
pub fn parse(name: &str, text: &str, is_func: &dyn Fn(&str) -> bool) -> Result<Parsed, Error> {
    let src = Arc::new(Source {
        name: name.to_string(),
        text: text.to_string(),
    });
    let items = lex(&src)?;
    let mut p = Parser {
        src: src.clone(),
        items,
        i: 0,
        defines: BTreeMap::new(),
        is_func,
        range_depth: 0,
    };
    let (nodes, stop) = p.list(true)?;
    if let Some((kw, pos)) = stop {
        return Err(p.err(pos, format!("unexpected {{{{{kw}}}}}")));
    }
    Ok(Parsed {
        main: Tree {
            name: name.to_string(),
            src,
            nodes,
        },
        defines: p.defines,
    })
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn parse_error(src: &Source, pos: usize, msg: impl Into<String>) -> Error {
    let (line, _) = src.location(pos);
    Error::Parse {
        name: src.name.clone(),
        line,
        msg: msg.into(),
    }
}

fn lex(src: &Source) -> Result<Vec<Item>, Error> {
    let s = src.text.as_bytes();
    let text = &src.text;
    let mut items = Vec::new();
    let mut pos = 0;
    let mut trim_next = false;
    loop {
        let open = text[pos..].find("{{").map(|i| i + pos);
        let chunk_end = open.unwrap_or(s.len());
        let mut chunk = &text[pos..chunk_end];
        if trim_next {
            chunk = chunk.trim_start_matches([' ', '\t', '\r', '\n']);
        }
        let Some(open) = open else {
            if !chunk.is_empty() {
                items.push(Item::Text(chunk.to_string()));
            }
            break;
        };
        let mut p = open + 2;
        let left_trim = s.get(p) == Some(&b'-') && s.get(p + 1).is_some_and(|c| is_space(*c));
        if left_trim {
            chunk = chunk.trim_end_matches([' ', '\t', '\r', '\n']);
            p += 2;
        }
        if !chunk.is_empty() {
            items.push(Item::Text(chunk.to_string()));
        }
        // Comments: {{/* ... */}} with optional trim markers.
        let mut q = p;
        while left_trim && q < s.len() && is_space(s[q]) {
            q += 1;
        }
        if text[q..].starts_with("/*") {
            let Some(close) = text[q + 2..].find("*/") else {
                return Err(parse_error(src, open, "unclosed comment"));
            };
            let mut r = q + 2 + close + 2;
            if text[r..].starts_with("}}") {
                trim_next = false;
                pos = r + 2;
            } else {
                while r < s.len() && is_space(s[r]) {
                    r += 1;
                }
                if text[r..].starts_with("-}}") && r > q + 2 + close + 2 {
                    trim_next = true;
                    pos = r + 3;
                } else {
                    return Err(parse_error(
                        src,
                        open,
                        "comment ends before closing delimiter",
                    ));
                }
            }
            continue;
        }
        let (toks, after, rtrim) = lex_action(src, p)?;
        items.push(Item::Action { pos: open, toks });
        trim_next = rtrim;
        pos = after;
    }
    Ok(items)
}

/// Lexes tokens from `p` up to the closing `}}`; returns the tokens, the offset after the
/// delimiter and whether it was ` -}}`.
fn lex_action(src: &Source, mut p: usize) -> Result<(Vec<Token>, usize, bool), Error> {
    let text = &src.text;
    let s = text.as_bytes();
    let mut toks = Vec::new();
    let mut paren = 0i32;
    loop {
        let start_ws = p;
        while p < s.len() && is_space(s[p]) {
            p += 1;
        }
        let space_before = p > start_ws || toks.is_empty();
        if p >= s.len() {
            return Err(parse_error(src, p, "unclosed action"));
        }
        if text[p..].starts_with("}}") {
            return Ok((toks, p + 2, false));
        }
        if p > start_ws && text[p..].starts_with("-}}") {
            return Ok((toks, p + 3, true));
        }
        let c = s[p];
        let start = p;
        let tok = match c {
            b'(' => {
                paren += 1;
                p += 1;
                Tok::LParen
            }
            b')' => {
                paren -= 1;
                if paren < 0 {
                    return Err(parse_error(src, p, "unexpected right paren"));
                }
                p += 1;
                Tok::RParen
            }
            b'|' => {
                p += 1;
                Tok::Pipe
            }
            b',' => {
                p += 1;
                Tok::Comma
            }
            b':' if s.get(p + 1) == Some(&b'=') => {
                p += 2;
                Tok::Declare
            }
            b'=' => {
                p += 1;
                Tok::Assign
            }
            b'"' => {
                let (v, end) = lex_quoted(src, p)?;
                p = end;
                Tok::Str(v)
            }
            b'`' => {
                let Some(close) = text[p + 1..].find('`') else {
                    return Err(parse_error(src, p, "unterminated raw quoted string"));
                };
                let v = text[p + 1..p + 1 + close].to_string();
                p = p + close + 2;
                Tok::Str(v)
            }
            b'\'' => {
                let (v, end) = lex_char(src, p)?;
                p = end;
                Tok::Num(Value::from(v))
            }
            b'$' => {
                p += 1;
                while p < s.len() && is_ident(s[p]) {
                    p += 1;
                }
                Tok::Var(text[start..p].to_string())
            }
            b'.' if s.get(p + 1).is_some_and(|c| c.is_ascii_digit())
                && toks_allow_number(&toks, space_before) =>
            {
                let end = scan_number(s, p);
                p = end;
                Tok::Num(number(src, start, &text[start..end])?)
            }
            b'.' => {
                p += 1;
                if p < s.len() && is_ident_start(s[p]) {
                    while p < s.len() && is_ident(s[p]) {
                        p += 1;
                    }
                    Tok::Field(text[start + 1..p].to_string())
                } else {
                    Tok::Dot
                }
            }
            b'0'..=b'9' | b'-' | b'+' => {
                let end = scan_number(s, p);
                if end == p || (end == p + 1 && !s[p].is_ascii_digit()) {
                    return Err(parse_error(
                        src,
                        p,
                        format!("bad character {:?}", c as char),
                    ));
                }
                p = end;
                Tok::Num(number(src, start, &text[start..end])?)
            }
            c if is_ident_start(c) => {
                while p < s.len() && is_ident(s[p]) {
                    p += 1;
                }
                Tok::Ident(text[start..p].to_string())
            }
            _ => {
                let ch = text[p..].chars().next().unwrap_or('?');
                return Err(parse_error(src, p, format!("unexpected {ch:?} in command")));
            }
        };
        toks.push(Token {
            tok,
            pos: start,
            end: p,
            space_before,
        });
    }
}

fn toks_allow_number(_toks: &[Token], space_before: bool) -> bool {
    space_before
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

fn scan_number(s: &[u8], mut p: usize) -> usize {
    if p < s.len() && (s[p] == b'-' || s[p] == b'+') {
        p += 1;
    }
    let hex = s.get(p) == Some(&b'0') && matches!(s.get(p + 1), Some(b'x' | b'X'));
    if hex {
        p += 2;
    }
    while p < s.len() {
        let c = s[p];
        let ok = c.is_ascii_alphanumeric()
            || c == b'_'
            || c == b'.'
            || ((c == b'-' || c == b'+')
                && matches!(s[p - 1], b'e' | b'E' | b'p' | b'P')
                && !(hex && matches!(s[p - 1], b'e' | b'E')));
        if !ok {
            break;
        }
        p += 1;
    }
    p
}

/// A Go numeric constant: integers stay integers, anything with a fraction or exponent
/// is a float (as Go's parser types untyped constants).
fn number(src: &Source, pos: usize, lit: &str) -> Result<Value, Error> {
    let bad = || parse_error(src, pos, format!("bad number syntax: {lit:?}"));
    let clean: String = lit.chars().filter(|c| *c != '_').collect();
    let (neg, body) = match clean.as_bytes().first() {
        Some(b'-') => (true, &clean[1..]),
        Some(b'+') => (false, &clean[1..]),
        _ => (false, &clean[..]),
    };
    let lower = body.to_ascii_lowercase();
    let int = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|c| c.is_ascii_digit())
    {
        i64::from_str_radix(&lower[1..], 8).ok()
    } else if lower.bytes().all(|c| c.is_ascii_digit()) {
        lower.parse::<i64>().ok()
    } else {
        None
    };
    if let Some(i) = int {
        return Ok(Value::from(if neg { -i } else { i }));
    }
    if lower.starts_with("0x") {
        return Err(bad());
    }
    let f: f64 = lower.parse().map_err(|_| bad())?;
    let f = if neg { -f } else { f };
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(bad)
}

fn lex_quoted(src: &Source, start: usize) -> Result<(String, usize), Error> {
    let text = &src.text;
    let mut out = String::new();
    let mut chars = text[start + 1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, start + 1 + i + 1)),
            '\n' => break,
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'a' => out.push('\x07'),
                    'b' => out.push('\x08'),
                    'f' => out.push('\x0c'),
                    'v' => out.push('\x0b'),
                    '\\' => out.push('\\'),
                    '"' => out.push('"'),
                    '\'' => out.push('\''),
                    'x' | 'u' | 'U' => {
                        let n = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut hex = String::new();
                        for _ in 0..n {
                            if let Some((_, h)) = chars.next() {
                                hex.push(h);
                            }
                        }
                        let code = u32::from_str_radix(&hex, 16).map_err(|_| {
                            parse_error(src, start, "invalid escape in quoted string")
                        })?;
                        out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                    }
                    _ => {
                        return Err(parse_error(
                            src,
                            start,
                            "unknown escape sequence in quoted string",
                        ))
                    }
                }
            }
            c => out.push(c),
        }
    }
    Err(parse_error(src, start, "unterminated quoted string"))
}

fn lex_char(src: &Source, start: usize) -> Result<(i64, usize), Error> {
    let text = &src.text[start + 1..];
    let mut chars = text.char_indices();
    let bad = || parse_error(src, start, "malformed character constant");
    let (_, c) = chars.next().ok_or_else(bad)?;
    let v = if c == '\\' {
        let (_, e) = chars.next().ok_or_else(bad)?;
        match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '\\' => '\\',
            '\'' => '\'',
            '0' => '\0',
            _ => return Err(bad()),
        }
    } else {
        c
    };
    match chars.next() {
        Some((i, '\'')) => Ok((v as i64, start + 1 + i + 1)),
        _ => Err(bad()),
    }
}

struct Parser<'f> {
    src: Arc<Source>,
    items: Vec<Item>,
    i: usize,
    defines: BTreeMap<String, Tree>,
    is_func: &'f dyn Fn(&str) -> bool,
    range_depth: usize,
}

type Stop = Option<(String, usize)>;

impl Parser<'_> {
    fn err(&self, pos: usize, msg: impl Into<String>) -> Error {
        parse_error(&self.src, pos, msg)
    }

    /// Parses nodes until `{{end}}`/`{{else ...}}` (returned as the stop keyword; an `else`
    /// action is left unconsumed for the caller) or end of input.
    fn list(&mut self, top: bool) -> Result<(Vec<Node>, Stop), Error> {
        let mut nodes = Vec::new();
        while self.i < self.items.len() {
            let idx = self.i;
            self.i += 1;
            let (pos, toks) = match &self.items[idx] {
                Item::Text(t) => {
                    nodes.push(Node::Text(t.clone()));
                    continue;
                }
                Item::Action { pos, toks } => (*pos, toks.clone()),
            };
            let Some(first) = toks.first() else {
                return Err(self.err(pos, "missing value for command"));
            };
            let kw = match &first.tok {
                Tok::Ident(k) if KEYWORDS.contains(&k.as_str()) => k.clone(),
                _ => {
                    let pipe = self.pipeline(&toks, pos, false)?;
                    nodes.push(Node::Action(pipe));
                    continue;
                }
            };
            let rest = &toks[1..];
            match kw.as_str() {
                "end" => {
                    if !rest.is_empty() {
                        return Err(self.err(pos, "unexpected tokens in end"));
                    }
                    return Ok((nodes, Some(("end".into(), pos))));
                }
                "else" => {
                    // Leave the action for the caller: it decides between plain else and
                    // `else if`/`else with` chains.
                    self.i = idx;
                    return Ok((nodes, Some(("else".into(), pos))));
                }
                "if" | "with" | "range" => {
                    let node = self.control(&kw, rest, pos)?;
                    nodes.push(node);
                }
                "define" => {
                    if !top {
                        return Err(self.err(pos, "unexpected {{define}}"));
                    }
                    let name = self.template_name(rest, pos, "define")?;
                    if rest.len() != 1 {
                        return Err(self.err(pos, "unexpected tokens in define clause"));
                    }
                    let (body, stop) = self.list(false)?;
                    self.expect_end(stop, pos, "define")?;
                    self.add_define(name, body);
                }
                "block" => {
                    let name = self.template_name(rest, pos, "block")?;
                    let pipe = self.pipeline(&rest[1..], pos, false)?;
                    let (body, stop) = self.list(false)?;
                    self.expect_end(stop, pos, "block")?;
                    self.add_define(name.clone(), body);
                    nodes.push(Node::Template {
                        pos,
                        name,
                        pipe: Some(pipe),
                    });
                }
                "template" => {
                    let name = self.template_name(rest, pos, "template")?;
                    let pipe = if rest.len() > 1 {
                        Some(self.pipeline(&rest[1..], pos, false)?)
                    } else {
                        None
                    };
                    nodes.push(Node::Template { pos, name, pipe });
                }
                "break" | "continue" => {
                    if self.range_depth == 0 {
                        return Err(self.err(pos, format!("{{{{{kw}}}}} outside {{{{range}}}}")));
                    }
                    if !rest.is_empty() {
                        return Err(self.err(pos, format!("unexpected tokens in {{{{{kw}}}}}")));
                    }
                    nodes.push(if kw == "break" {
                        Node::Break
                    } else {
                        Node::Continue
                    });
                }
                _ => return Err(self.err(pos, format!("unexpected keyword {kw}"))),
            }
        }
        Ok((nodes, None))
    }

    fn add_define(&mut self, name: String, nodes: Vec<Node>) {
        // Go: an empty (whitespace-only) redefinition does not replace an existing body.
        let empty = nodes
            .iter()
            .all(|n| matches!(n, Node::Text(t) if t.trim().is_empty()));
        if empty && self.defines.contains_key(&name) {
            return;
        }
        self.defines.insert(
            name.clone(),
            Tree {
                name,
                src: self.src.clone(),
                nodes,
            },
        );
    }

    fn expect_end(&self, stop: Stop, pos: usize, what: &str) -> Result<(), Error> {
        match stop {
            Some((k, _)) if k == "end" => Ok(()),
            Some((k, p)) => Err(self.err(p, format!("unexpected {{{{{k}}}}} in {what}"))),
            None => Err(self.err(pos, format!("unexpected EOF in {what}"))),
        }
    }

    fn template_name(&self, rest: &[Token], pos: usize, what: &str) -> Result<String, Error> {
        match rest.first().map(|t| &t.tok) {
            Some(Tok::Str(s)) => Ok(s.clone()),
            _ => Err(self.err(pos, format!("missing name in {what} clause"))),
        }
    }

    /// `if`/`with`/`range` with its body, optional `else` (or `else if`/`else with` chain).
    fn control(&mut self, kw: &str, rest: &[Token], pos: usize) -> Result<Node, Error> {
        let pipe = self.pipeline(rest, pos, kw == "range")?;
        if kw == "range" {
            self.range_depth += 1;
        }
        let body = self.list(false);
        if kw == "range" {
            self.range_depth -= 1;
        }
        let (list, stop) = body?;
        let else_list = match stop {
            Some((k, _)) if k == "end" => None,
            Some((k, p)) if k == "else" => {
                let Item::Action { toks, .. } = &self.items[self.i] else {
                    return Err(self.err(p, "internal: else without action"));
                };
                let toks = toks.clone();
                self.i += 1;
                let chained = match toks.get(1).map(|t| &t.tok) {
                    Some(Tok::Ident(k2)) if k2 == "if" || k2 == "with" => Some(k2.clone()),
                    _ => None,
                };
                if let Some(k2) = chained {
                    // `{{else if x}}` shares the outer `{{end}}`: the nested control consumes it.
                    let nested = self.control(&k2, &toks[2..], p)?;
                    Some(vec![nested])
                } else {
                    if toks.len() > 1 {
                        return Err(self.err(p, "unexpected tokens in else"));
                    }
                    let (else_nodes, stop2) = self.list(false)?;
                    self.expect_end(stop2, pos, kw)?;
                    Some(else_nodes)
                }
            }
            Some((k, p)) => return Err(self.err(p, format!("unexpected {{{{{k}}}}}"))),
            None => return Err(self.err(pos, format!("unexpected EOF in {kw}"))),
        };
        let c = Control {
            pos,
            pipe,
            list,
            else_list,
        };
        Ok(match kw {
            "if" => Node::If(c),
            "with" => Node::With(c),
            _ => Node::Range(c),
        })
    }

    fn pipeline(&self, toks: &[Token], pos: usize, allow_two: bool) -> Result<Pipe, Error> {
        let mut i = 0;
        let mut decl = Vec::new();
        let mut is_assign = false;
        // Declarations: `$x :=`, `$x =`, and in range `$i, $e :=`.
        if let Some(Tok::Var(v)) = toks.first().map(|t| &t.tok) {
            match toks.get(1).map(|t| &t.tok) {
                Some(Tok::Declare) | Some(Tok::Assign) => {
                    is_assign = toks[1].tok == Tok::Assign;
                    decl.push(v.clone());
                    i = 2;
                }
                Some(Tok::Comma) if allow_two => {
                    if let (Some(Tok::Var(v2)), Some(Tok::Declare | Tok::Assign)) =
                        (toks.get(2).map(|t| &t.tok), toks.get(3).map(|t| &t.tok))
                    {
                        is_assign = toks[3].tok == Tok::Assign;
                        decl.push(v.clone());
                        decl.push(v2.clone());
                        i = 4;
                    } else {
                        return Err(self.err(toks[0].pos, "too many declarations in command"));
                    }
                }
                _ => {}
            }
        }
        let (pipe, next) = self.pipe_body(toks, i, pos, false)?;
        if next != toks.len() {
            return Err(self.err(toks[next].pos, "unexpected token in command"));
        }
        Ok(Pipe {
            decl,
            is_assign,
            ..pipe
        })
    }

    /// Commands separated by `|` from `toks[i..]` up to the end (or a `)` when `in_paren`).
    fn pipe_body(
        &self,
        toks: &[Token],
        mut i: usize,
        pos: usize,
        in_paren: bool,
    ) -> Result<(Pipe, usize), Error> {
        let mut cmds = Vec::new();
        let pipe_pos = toks.get(i).map_or(pos, |t| t.pos);
        loop {
            let start = i;
            let mut args = Vec::new();
            let mut spans = Vec::new();
            while i < toks.len() && !matches!(toks[i].tok, Tok::Pipe | Tok::RParen) {
                if !args.is_empty() && !toks[i].space_before {
                    return Err(self.err(toks[i].pos, "missing space between arguments"));
                }
                let (arg, next) = self.operand(toks, i, pos)?;
                args.push(arg);
                spans.push((toks[i].pos, toks[next - 1].end));
                i = next;
            }
            if args.is_empty() {
                return Err(self.err(
                    toks.get(start).map_or(pos, |t| t.pos),
                    "missing value for command",
                ));
            }
            let cmd_pos = toks[start].pos;
            let end = toks[i - 1].end;
            cmds.push(Cmd {
                pos: cmd_pos,
                end,
                args,
                spans,
            });
            match toks.get(i).map(|t| &t.tok) {
                Some(Tok::Pipe) => i += 1,
                Some(Tok::RParen) if in_paren => break,
                Some(Tok::RParen) => return Err(self.err(toks[i].pos, "unexpected right paren")),
                _ => break,
            }
        }
        // Go: a non-function in a later pipeline stage cannot take the piped value.
        for c in cmds.iter().skip(1) {
            if !matches!(c.args[0], Arg::Func(_)) {
                return Err(self.err(c.pos, "non executable command in pipeline stage"));
            }
        }
        Ok((
            Pipe {
                pos: pipe_pos,
                decl: Vec::new(),
                is_assign: false,
                cmds,
            },
            i,
        ))
    }

    fn fields(toks: &[Token], mut i: usize) -> (Vec<String>, usize) {
        let mut fields = Vec::new();
        while let Some(Token {
            tok: Tok::Field(f),
            space_before: false,
            ..
        }) = toks.get(i)
        {
            fields.push(f.clone());
            i += 1;
        }
        (fields, i)
    }

    fn operand(&self, toks: &[Token], i: usize, pos: usize) -> Result<(Arg, usize), Error> {
        let t = &toks[i];
        let (arg, next) = match &t.tok {
            Tok::Dot => (Arg::Dot, i + 1),
            Tok::Field(f) => {
                let (mut more, next) = Self::fields(toks, i + 1);
                more.insert(0, f.clone());
                return Ok((Arg::Field(more), next));
            }
            Tok::Var(v) => {
                let (fields, next) = Self::fields(toks, i + 1);
                return Ok((Arg::Var(v.clone(), fields), next));
            }
            Tok::Ident(name) => match name.as_str() {
                "true" => (Arg::Const(Value::Bool(true)), i + 1),
                "false" => (Arg::Const(Value::Bool(false)), i + 1),
                "nil" => (Arg::Nil, i + 1),
                _ if KEYWORDS.contains(&name.as_str()) => {
                    return Err(self.err(t.pos, format!("unexpected <{name}> in operand")));
                }
                _ => {
                    if !(self.is_func)(name) {
                        return Err(self.err(t.pos, format!("function {name:?} not defined")));
                    }
                    (Arg::Func(name.clone()), i + 1)
                }
            },
            Tok::Str(s) => (Arg::Const(Value::String(s.clone())), i + 1),
            Tok::Num(n) => (Arg::Const(n.clone()), i + 1),
            Tok::LParen => {
                let (pipe, close) = self.pipe_body(toks, i + 1, pos, true)?;
                if toks.get(close).map(|t| &t.tok) != Some(&Tok::RParen) {
                    return Err(self.err(t.pos, "unclosed left paren"));
                }
                let (fields, next) = Self::fields(toks, close + 1);
                return Ok((Arg::Pipe(Box::new(pipe), fields), next));
            }
            other => return Err(self.err(t.pos, format!("unexpected {other:?} in operand"))),
        };
        // `.field` right after a non-field term (e.g. a constant) is an error in Go.
        if let Some(Token {
            tok: Tok::Field(_),
            space_before: false,
            pos,
            ..
        }) = toks.get(next)
        {
            if !matches!(arg, Arg::Dot) {
                return Err(self.err(*pos, "unexpected . after term"));
            }
        }
        Ok((arg, next))
    }
}
