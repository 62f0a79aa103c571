//! Opens a document in the user's editor (KUBE_EDITOR, EDITOR, then `vi`).

use std::io::Write;

use anyhow::{bail, Context, Result};

/// The editor command line to run.
fn editor_command() -> String {
    for var in ["KUBE_EDITOR", "EDITOR"] {
        if let Ok(v) = std::env::var(var) {
            if !v.trim().is_empty() {
                return v;
            }
        }
    }
    "vi".to_string()
}

/// Writes `text` to a temporary `.yaml` file, runs the editor on it, and
/// returns what the user saved.
pub fn edit(text: &str) -> Result<String> {
    let mut file = tempfile::Builder::new()
        .prefix("kops-edit-")
        .suffix(".yaml")
        .tempfile()
        .context("creating a temporary file to edit")?;
    file.write_all(text.as_bytes())
        .context("writing the temporary file")?;
    file.flush()?;
    let path = file.path().to_path_buf();
    let editor = editor_command();
    // Through the shell, so editors with arguments (`code --wait`) work.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("kops-editor")
        .arg(&path)
        .status()
        .with_context(|| format!("starting the editor `{editor}`"))?;
    if !status.success() {
        bail!("the editor `{editor}` exited with {status}; nothing saved\nhint: set EDITOR (or KUBE_EDITOR) to an editor that exits with 0 after saving");
    }
    std::fs::read_to_string(&path)
        .with_context(|| format!("reading `{}` back from the editor", path.display()))
}

/// Removes the comment block kops puts at the top of an edited document.
pub fn strip_header(text: &str) -> String {
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.peek() {
        if l.starts_with('#') {
            lines.next();
        } else {
            break;
        }
    }
    let mut out: String = lines.collect::<Vec<_>>().join("\n");
    out.push('\n');
    out
}

/// The comment block shown above the document, with the last error if any.
pub fn header(error: Option<&str>) -> String {
    let mut h = String::from(
        "# Please edit the object below. Lines beginning with a '#' will be ignored,\n\
         # and an empty file will abort the edit. If an error occurs while saving this file will be\n\
         # reopened with the relevant failures.\n#\n",
    );
    if let Some(e) = error {
        for line in e.lines() {
            h.push_str(&format!("# {line}\n"));
        }
        h.push_str("#\n");
    }
    h
}
