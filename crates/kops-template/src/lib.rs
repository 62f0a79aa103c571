//! Go `text/template` with the Sprig function library, for `kops toolbox template`.
//!
//! Teams keep a cluster template and values files in git and render them with kops; their
//! templates must render here exactly as they do there, so this is Go's template
//! language (actions, pipelines, variables, `range`/`if`/`with`/`define`/`template`/`block`,
//! `{{-`/`-}}` trimming) evaluated over JSON-shaped values, printing values the way Go's
//! `fmt` does, plus the functions kops registers (Sprig's, its own `indent` and `include`).
//!
//! Where it differs from kops:
//! - missing Sprig functions: regex (`regex*`), dates (`now`, `date`, `ago`, `duration`...),
//!   randomness (`rand*`, `uuidv4`, `shuffle`), crypto (`genCA`, `genPrivateKey`, `bcrypt`,
//!   `htpasswd`, `encryptAES`...), `getHostByName`, `urlParse`/`urlJoin`, `wrap`/`wrapWith`,
//!   `abbrevboth`, `toDecimal`, `semver` (`semverCompare` is there); using one is a parse
//!   error naming it, as for any unknown function;
//! - kops' `Channel*` functions are left to the caller (`Engine::add_func`);
//! - more lenient than Go: numbers are accepted where a string is expected and ints compare
//!   with floats (Go errors; a template that renders in kops renders the same here);
//! - Sprig's `set`/`unset`/`merge` change a map in place in Go; here only when the map is
//!   held in a variable (`$d`, `$d.a`);
//! - extras kops does not have: `toYaml`, `fromYaml`, `required` (Helm's).
//!
//! ```
//! use kops_template::Engine;
//! let mut eng = Engine::new();
//! eng.add_template("t", "{{ range .igs }}- {{ .name | upper }}\n{{ end }}").unwrap();
//! let out = eng.execute("t", &serde_json::json!({"igs": [{"name": "nodes"}]})).unwrap();
//! assert_eq!(out, "- NODES\n");
//! ```

mod exec;
mod funcs;
mod gofmt;
mod govalue;
mod parse;
mod semver;
pub mod toolbox;
pub mod values;
mod yaml;

use std::path::Path;

pub use exec::{CustomFunc, Engine};
pub use toolbox::ToolboxOptions;

/// Everything that can go wrong parsing, executing or gathering inputs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A syntax error, with the template's name and line as Go reports it.
    #[error("template: {name}:{line}: {msg}")]
    Parse {
        name: String,
        line: usize,
        msg: String,
    },
    /// An execution error: where (`name:line:col`), in which template, at which command.
    #[error("template: {name}:{line}:{col}: executing {template:?} at <{at}>: {msg}")]
    Exec {
        name: String,
        line: usize,
        col: usize,
        template: String,
        at: String,
        msg: String,
    },
    #[error("template: no template {0:?}")]
    NoTemplate(String),
    #[error("exceeded maximum template depth ({0})")]
    Depth(usize),
    #[error("unable to render template: {template}, error: {source}")]
    Render {
        template: String,
        source: Box<Error>,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Values(String),
}

impl Error {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

impl Engine {
    /// Parses `text` as template `key`, naming it `display` in error messages (kops keys
    /// the rendered file as `mainTemplate`; errors should name the file).
    pub fn add_template_as(&mut self, key: &str, display: &str, text: &str) -> Result<(), Error> {
        self.add_template_inner(key, display, text)
    }
}

/// `fmt.Sprint` of a value, as Go (and so kops) prints template data.
pub fn go_sprint(v: &serde_json::Value) -> String {
    gofmt::sprint(v)
}
