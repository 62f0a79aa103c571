//! Long scalars folded as kops writes them. Go's YAML emitter (which kops'
//! manifests go through) breaks a plain or quoted scalar value at a space
//! once the line is past 80 columns, continuing two columns in from the
//! key (or list dash) that owns it; block scalars (`|`) and keys are left
//! alone. The emitter kops-rs uses does not fold, so its output is folded
//! here, line by line, after the fact.

/// The column past which Go's emitter breaks a scalar at its next space.
const WIDTH: usize = 80;

/// `text` with every long scalar value folded as Go's emitter folds it.
pub(super) fn fold(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    // Inside a block scalar: the indent its content lines go deeper than.
    let mut block: Option<usize> = None;
    for line in text.split('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if let Some(owner) = block {
            if line.trim().is_empty() || indent > owner {
                out.push(line.to_string());
                continue;
            }
            block = None;
        }
        let parts = split(line);
        if starts_block_scalar(line) {
            block = Some(parts.as_ref().map_or(indent, |p| p.owner));
            out.push(line.to_string());
            continue;
        }
        let long = line.chars().count() > WIDTH && line.trim().contains(' ');
        let Some(parts) = parts.filter(|_| long) else {
            out.push(line.to_string());
            continue;
        };
        let value: Vec<char> = parts.value.chars().collect();
        let continuation = parts.owner + 2;
        let quoted = |q: char| value.len() >= 2 && value[0] == q && value[value.len() - 1] == q;
        let folded = if quoted('"') {
            fold_double_quoted(parts.prefix, &value, continuation)
        } else if quoted('\'') {
            fold_single_quoted(parts.prefix, &value, continuation)
        } else if value
            .first()
            .is_some_and(|c| matches!(c, '|' | '>' | '&' | '*' | '!' | '{' | '['))
        {
            vec![line.to_string()]
        } else {
            let tokens: Vec<String> = value.iter().map(|c| c.to_string()).collect();
            fold_tokens(
                parts.prefix.to_string(),
                &tokens,
                continuation,
                Style::Plain,
            )
        };
        out.extend(folded);
    }
    out.join("\n")
}

/// A line holding a scalar value: what precedes the value, the value, and
/// the column of the key or dash that owns it.
struct Parts<'a> {
    prefix: &'a str,
    value: &'a str,
    owner: usize,
}

/// Splits `indent [- ...] [key: ] value`; `None` for lines without a value
/// on them (`key:` opening a nested block).
fn split(line: &str) -> Option<Parts<'_>> {
    let mut i = line.len() - line.trim_start_matches(' ').len();
    let mut owner = i;
    while line[i..].starts_with("- ") {
        owner = i;
        i += 2;
    }
    let rest = &line[i..];
    let first = rest.chars().next()?;
    if first == '"' || first == '\'' {
        let end = i + quoted_len(rest, first)?;
        if line[end..].starts_with(": ") {
            return Some(Parts {
                prefix: &line[..end + 2],
                value: &line[end + 2..],
                owner: i,
            });
        }
        return (end == line.len()).then(|| Parts {
            prefix: &line[..i],
            value: &line[i..],
            owner,
        });
    }
    match rest.find(": ") {
        Some(k) => Some(Parts {
            prefix: &line[..i + k + 2],
            value: &line[i + k + 2..],
            owner: i,
        }),
        None if rest.ends_with(':') => None,
        None => Some(Parts {
            prefix: &line[..i],
            value: rest,
            owner,
        }),
    }
}

/// The byte length of the quoted scalar `text` starts with, quotes included.
fn quoted_len(text: &str, quote: char) -> Option<usize> {
    let bytes = text.as_bytes();
    let q = quote as u8;
    let mut j = 1;
    while j < bytes.len() {
        if q == b'"' && bytes[j] == b'\\' {
            j += 2;
            continue;
        }
        if bytes[j] == q {
            if q == b'\'' && bytes.get(j + 1) == Some(&b'\'') {
                j += 2;
                continue;
            }
            return Some(j + 1);
        }
        j += 1;
    }
    None
}

/// Whether the line opens a block scalar (`key: |-`, `- |`).
fn starts_block_scalar(line: &str) -> bool {
    let trimmed = line.trim();
    let Some(at) = trimmed.rfind(['|', '>']) else {
        return false;
    };
    let indicator = &trimmed[at + 1..];
    if !indicator
        .chars()
        .all(|c| matches!(c, '-' | '+') || c.is_ascii_digit())
    {
        return false;
    }
    let before = &trimmed[..at];
    before.is_empty() || before.ends_with(": ") || before.ends_with("- ")
}

#[derive(Clone, Copy, PartialEq)]
enum Style {
    Plain,
    Single,
    Double,
}

/// Writes `tokens` (characters, or escapes written as one) after `prefix`,
/// breaking at a space past [`WIDTH`] as Go's emitter does for `style`.
fn fold_tokens(prefix: String, tokens: &[String], indent: usize, style: Style) -> Vec<String> {
    let mut lines = Vec::new();
    let mut column = prefix.chars().count();
    let mut current = prefix;
    let mut spaces = false;
    for (i, token) in tokens.iter().enumerate() {
        if token == " " {
            let next_is_space = tokens.get(i + 1).is_some_and(|t| t == " ");
            let inside = i > 0 && i + 1 < tokens.len();
            let may_break = match style {
                Style::Plain => i + 1 < tokens.len() && !next_is_space,
                Style::Single => inside && !next_is_space,
                Style::Double => inside,
            };
            if !spaces && column > WIDTH && may_break {
                lines.push(std::mem::replace(&mut current, " ".repeat(indent)));
                column = indent;
                if style == Style::Double && next_is_space {
                    current.push('\\');
                    column += 1;
                }
            } else {
                current.push(' ');
                column += 1;
            }
            spaces = true;
        } else {
            current.push_str(token);
            column += token.chars().count();
            spaces = false;
        }
    }
    lines.push(current);
    lines
}

fn fold_double_quoted(prefix: &str, value: &[char], indent: usize) -> Vec<String> {
    let body = &value[1..value.len() - 1];
    let mut tokens = Vec::new();
    let mut j = 0;
    while j < body.len() {
        let len = if body[j] == '\\' {
            match body.get(j + 1) {
                Some('x') => 4,
                Some('u') => 6,
                Some('U') => 10,
                _ => 2,
            }
        } else {
            1
        };
        let end = (j + len).min(body.len());
        tokens.push(body[j..end].iter().collect::<String>());
        j = end;
    }
    let mut lines = fold_tokens(format!("{prefix}\""), &tokens, indent, Style::Double);
    if let Some(last) = lines.last_mut() {
        last.push('"');
    }
    lines
}

fn fold_single_quoted(prefix: &str, value: &[char], indent: usize) -> Vec<String> {
    let body = &value[1..value.len() - 1];
    let mut tokens = Vec::new();
    let mut j = 0;
    while j < body.len() {
        if body[j] == '\'' && body.get(j + 1) == Some(&'\'') {
            tokens.push("''".to_string());
            j += 2;
        } else {
            tokens.push(body[j].to_string());
            j += 1;
        }
    }
    let mut lines = fold_tokens(format!("{prefix}'"), &tokens, indent, Style::Single);
    if let Some(last) = lines.last_mut() {
        last.push('\'');
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_break_at_a_space_past_80_columns() {
        let text = "    - description: CreationTimestamp is a timestamp representing the server time when this object was created.\n";
        assert_eq!(
            fold(text),
            "    - description: CreationTimestamp is a timestamp representing the server time when\n        this object was created.\n"
        );
        let quoted = format!("  a: \"{} x\"", "word ".repeat(20).trim_end());
        let folded = fold(&quoted);
        assert!(folded.contains("\n    "), "{folded}");
        assert!(folded.ends_with("x\""), "{folded}");
    }

    #[test]
    fn short_lines_keys_and_block_scalars_are_left_alone() {
        let long = "word ".repeat(30);
        let text = format!("a: short\nb: |-\n  {long}\nc: d\n");
        assert_eq!(fold(&text), text);
    }
}
